"""cheader.py - read the CUDA driver headers with a real C parser.

The headers are preprocessed with the system C preprocessor (gcc -E) with
-D__CUDA_API_VERSION_INTERNAL=1, which makes cuda.h declare every versioned
and legacy export under its literal symbol name. GNU extensions that pycparser
cannot parse (they only occur in the libc headers cuda.h pulls in) are
defined away on the preprocessor command line. The graphics interop headers
(cudaGL.h, cudaEGL.h, cudaVDPAU.h) need GL/EGL/VDPAU types: a few typedefs
stand in for them (see GFX_STUBS); those headers are read only to learn the
cuGetProcAddress mapping of their functions, never compiled into SCUDA.
"""

import os
import re
import shutil
import subprocess
import tempfile

import pycparser
from pycparser import c_ast
from pycparser.c_generator import CGenerator

# Headers whose declarations the generated C code can use (compiled with the
# real headers). Everything else is "prototype-less" for code generation.
REAL_HEADERS = ["cuda.h", "cudaProfiler.h"]
TYPEDEF_HEADERS = ["cudaTypedefs.h", "cudaProfilerTypedefs.h"]
GFX_TYPEDEF_HEADERS = ["cudaGLTypedefs.h", "cudaEGLTypedefs.h", "cudaVDPAUTypedefs.h"]

GFX_STUBS = {
    "GL/gl.h": "typedef unsigned int GLuint;\ntypedef unsigned int GLenum;\n",
    "EGL/egl.h": ("typedef int EGLint;\ntypedef void *EGLImageKHR;\n"
                  "typedef void *EGLStreamKHR;\ntypedef void *EGLSyncKHR;\n"),
    "EGL/eglext.h": "",
    "vdpau/vdpau.h": ("typedef unsigned int VdpDevice;\ntypedef unsigned int VdpVideoSurface;\n"
                      "typedef unsigned int VdpOutputSurface;\n"
                      "typedef int VdpGetProcAddress(unsigned int device, unsigned int function_id,"
                      " void **function_pointer);\n"),
}

GNU_DEFINES = [
    "-D__attribute__(x)=", "-D__extension__=", "-D__restrict=", "-D__restrict__=",
    "-D__inline=", "-D__inline__=", "-D__asm__(x)=", "-D__asm(x)=",
    "-D__builtin_va_list=void*", "-D__alignof__(x)=8", "-D_Noreturn=", "-D_Alignas(x)=",
]

PFN_RE = re.compile(r"^PFN_(\w+?)_v(\d+)(?:_(ptds|ptsz))?$")


def find_cuda_include():
    for cand in (os.environ.get("CUDA_INCLUDE_DIR"), os.environ.get("CUDA_INCLUDE"),
                 os.environ.get("CUDA_HOME") and os.path.join(os.environ["CUDA_HOME"], "include"),
                 os.environ.get("CUDA_PATH") and os.path.join(os.environ["CUDA_PATH"], "include"),
                 "/usr/local/cuda/include"):
        if cand and os.path.exists(os.path.join(cand, "cuda.h")):
            return cand
    raise SystemExit("cuda.h not found: set CUDA_INCLUDE_DIR or CUDA_HOME")


def preprocess(cuda_inc, headers, extra_inc=None):
    cc = os.environ.get("CC", "gcc")
    if shutil.which(cc) is None:
        cc = "cpp"
    src = "".join("#include <%s>\n" % h for h in headers)
    cmd = [cc, "-E", "-P", "-x", "c", "-std=c11", "-D__CUDA_API_VERSION_INTERNAL=1",
           "-I" + cuda_inc] + (["-I" + extra_inc] if extra_inc else []) + GNU_DEFINES + ["-"]
    if os.path.basename(cc) == "cpp":
        cmd = [c for c in cmd if c not in ("-E", "-std=c11")]
    out = subprocess.run(cmd, input=src, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit("preprocessing failed:\n" + out.stderr)
    return out.stdout


def parse(text, name):
    return pycparser.CParser().parse(text, name)


class Param:
    def __init__(self, name, node, index):
        self.name = name
        self.node = node          # the parameter's type node (TypeDecl/PtrDecl/ArrayDecl)
        self.index = index

    def __repr__(self):
        return "Param(%s)" % self.name


class Func:
    def __init__(self, name, decl, params, real):
        self.name = name
        self.decl = decl          # c_ast.FuncDecl
        self.params = params      # [Param]
        self.real = real          # declared by a header the generated C includes

    def __repr__(self):
        return "Func(%s)" % self.name


class Header:
    """Everything the generator needs to know from the CUDA headers."""

    def __init__(self, cuda_inc=None):
        self.cuda_inc = cuda_inc or find_cuda_include()
        self.gen = CGenerator()
        tmp = tempfile.mkdtemp(prefix="scuda-gen-")
        try:
            for rel, text in GFX_STUBS.items():
                path = os.path.join(tmp, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w") as f:
                    f.write(text)
            real_ast = parse(preprocess(self.cuda_inc, REAL_HEADERS + TYPEDEF_HEADERS), "cuda.h")
            all_ast = parse(preprocess(self.cuda_inc, REAL_HEADERS + TYPEDEF_HEADERS + GFX_TYPEDEF_HEADERS, tmp),
                            "cuda+gfx")
        finally:
            shutil.rmtree(tmp)
        self.cuda_version = self._cuda_version()
        self.typedefs = {}        # name -> type node
        self.structs = {}         # struct/union tag -> c_ast.Struct/Union with decls
        self.enums = {}           # enumerator name -> value text
        self.funcs = {}           # name -> Func
        self.pfns = []            # (base, version, flavour, typedef node)
        real_names = set()
        for ext in real_ast.ext:
            if isinstance(ext, c_ast.Decl) and isinstance(ext.type, c_ast.FuncDecl):
                real_names.add(ext.name)
        for ext in all_ast.ext:
            self._collect(ext, real_names)
        self.legacy_pfns = self._legacy_pfn_names()

    # ---- collection -------------------------------------------------------

    def _cuda_version(self):
        with open(os.path.join(self.cuda_inc, "cuda.h")) as f:
            m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", f.read())
        return int(m.group(1))

    def _legacy_pfn_names(self):
        """PFN typedefs inside cudaTypedefs.h's `#if defined(__CUDA_API_VERSION_INTERNAL)`
        block: the old ABI (pre-3.2 32-bit sizes and the like)."""
        with open(os.path.join(self.cuda_inc, "cudaTypedefs.h")) as f:
            text = f.read()
        m = re.search(r"#if defined\(__CUDA_API_VERSION_INTERNAL\)(.*?)#endif", text, re.S)
        return set(re.findall(r"\*(PFN_\w+)\)", m.group(1))) if m else set()

    def _collect(self, ext, real_names):
        if isinstance(ext, c_ast.Typedef):
            self.typedefs[ext.name] = ext.type
            m = PFN_RE.match(ext.name)
            if m and isinstance(ext.type, c_ast.PtrDecl) and isinstance(ext.type.type, c_ast.FuncDecl):
                self.pfns.append((m.group(1), int(m.group(2)), m.group(3) or "", ext.name, ext.type.type))
            self._collect_tags(ext.type)
        elif isinstance(ext, c_ast.Decl):
            if isinstance(ext.type, c_ast.FuncDecl):
                if ext.name in self.funcs:
                    return
                fd = ext.type
                params = []
                if fd.args is not None:
                    for i, p in enumerate(fd.args.params):
                        if isinstance(p, c_ast.EllipsisParam):
                            raise SystemExit("variadic function %s" % ext.name)
                        if isinstance(p, c_ast.Typename) and self._is_void(p.type):
                            continue
                        name = p.name or ("arg%d" % i)
                        params.append(Param(name, p.type, i))
                self.funcs[ext.name] = Func(ext.name, fd, params, ext.name in real_names)
            else:
                self._collect_tags(ext.type)

    def _collect_tags(self, node):
        while isinstance(node, (c_ast.PtrDecl, c_ast.ArrayDecl, c_ast.TypeDecl)):
            node = node.type
        if isinstance(node, (c_ast.Struct, c_ast.Union)):
            if node.decls is not None and node.name:
                self.structs[(type(node).__name__, node.name)] = node
            for d in node.decls or []:
                self._collect_tags(d.type)
        elif isinstance(node, c_ast.Enum) and node.values is not None:
            for e in node.values.enumerators:
                self.enums[e.name] = e.value

    @staticmethod
    def _is_void(node):
        return (isinstance(node, c_ast.TypeDecl) and isinstance(node.type, c_ast.IdentifierType)
                and node.type.names == ["void"])

    # ---- type helpers -----------------------------------------------------

    def type_text(self, node, name=""):
        """C text of a type (optionally declaring `name`)."""
        import copy
        n = copy.deepcopy(node)
        _rename(n, name)
        return self.gen.visit(c_ast.Typename(name=None, quals=[], align=None, type=n)) if not name \
            else self.gen.visit(c_ast.Decl(name=name, quals=[], align=[], storage=[], funcspec=[],
                                           type=n, init=None, bitsize=None))

    def params_text(self, func):
        if not func.params:
            return "void"
        return ", ".join(self.type_text(p.node, p.name) for p in func.params)

    def canon(self, node):
        """Canonical spelling of a type with every typedef resolved (for comparing
        prototypes); qualifiers kept, names dropped."""
        if isinstance(node, c_ast.TypeDecl):
            q = "const " if "const" in node.quals else ""
            t = node.type
            if isinstance(t, c_ast.IdentifierType):
                n = " ".join(t.names)
                if n in self.typedefs:
                    return q + self.canon(self.typedefs[n])
                return q + n
            if isinstance(t, (c_ast.Struct, c_ast.Union)):
                return q + type(t).__name__.lower() + " " + (t.name or "?")
            if isinstance(t, c_ast.Enum):
                return q + "int"
            raise ValueError(t)
        if isinstance(node, c_ast.PtrDecl):
            q = " const" if "const" in node.quals else ""
            return self.canon(node.type) + " *" + q
        if isinstance(node, c_ast.ArrayDecl):
            return self.canon(node.type) + " []"
        if isinstance(node, c_ast.FuncDecl):
            args = []
            for p in (node.args.params if node.args else []):
                if isinstance(p, c_ast.Typename) and self._is_void(p.type):
                    continue
                args.append(self.canon(p.type))
            return self.canon(node.type) + " (" + ", ".join(args) + ")"
        if isinstance(node, c_ast.Typename):
            return self.canon(node.type)
        raise ValueError(node)

    def func_canon(self, fd):
        args = []
        for p in (fd.args.params if fd.args else []):
            if isinstance(p, c_ast.Typename) and self._is_void(p.type):
                continue
            args.append(self.canon(p.type))
        return tuple(args)

    def resolve(self, node):
        """Follow typedefs until the node is not a TypeDecl naming a typedef."""
        while (isinstance(node, c_ast.TypeDecl) and isinstance(node.type, c_ast.IdentifierType)
               and " ".join(node.type.names) in self.typedefs):
            node = self.typedefs[" ".join(node.type.names)]
        return node

    def typedef_name(self, node):
        if isinstance(node, c_ast.TypeDecl) and isinstance(node.type, c_ast.IdentifierType):
            return " ".join(node.type.names)
        return None

    def struct_body(self, node):
        """For a struct/union TypeDecl return its definition (or None when opaque)."""
        t = node.type
        if t.decls is not None:
            return t
        return self.structs.get((type(t).__name__, t.name))


def _rename(node, name):
    while not isinstance(node, c_ast.TypeDecl):
        node = node.type
    node.declname = name or None
