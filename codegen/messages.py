"""messages.py - typed wire messages of the hand-written ops.

driver_spec.MESSAGES gives every protocol-internal op (and every manual
export that sends an op of its own) a typed request and reply. This module
parses it and writes one encoder and one decoder per message into
src/common/messages.gen.[ch], which the client and the server both use.
The format is described in driver_spec.py above MESSAGES.
"""

import re

SCALARS = {
    "u8": ("uint8_t", 1), "u16": ("uint16_t", 2), "u32": ("uint32_t", 4), "u64": ("uint64_t", 8),
    "i32": ("int32_t", 4), "i64": ("int64_t", 8), "f32": ("float", 4), "f64": ("double", 8),
    # u64 on the wire; the name says what it carries
    "handle": ("uint64_t", 8), "dptr": ("uint64_t", 8),
}
WIRE_FN = {"handle": "u64", "dptr": "u64"}
OP_FLAGS = ("blocking", "observes", "any_context")
DIR_NAMES = {"in": "req", "out": "rep"}


class MessageError(Exception):
    pass


class Field:
    def __init__(self, line, lineno):
        self.lineno = lineno
        m = re.match(r"^(\w+(?::\w+)?)\s+(\w+)(?:\[(\w*)\])?((?:\s+\w+(?:=\S+)?)*)\s*$", line)
        if not m:
            raise MessageError("MESSAGES line %d: cannot read field %r" % (lineno, line))
        self.type, self.name, dim, opts = m.group(1), m.group(2), m.group(3), m.group(4).split()
        self.fixed = dim if dim else None   # a number or a constant name
        self.var = dim == ""                # T name[] max=N: u32 count, then the elements
        self.max = None
        self.bulk = False
        for o in opts:
            if o.startswith("max="):
                self.max = o[4:]
            elif o == "bulk":
                self.bulk = True
            else:
                raise MessageError("MESSAGES line %d: unknown option %r" % (lineno, o))
        if self.var and not self.max:
            raise MessageError("MESSAGES line %d: %s[] needs max=N" % (lineno, self.name))
        if self.bulk and self.type != "bytes":
            raise MessageError("MESSAGES line %d: only bytes can be bulk" % lineno)
        if self.type in ("str", "bytes") and (self.fixed or self.var):
            raise MessageError("MESSAGES line %d: no arrays of %s" % (lineno, self.type))


class Record:
    def __init__(self, name, lineno, kind):
        self.name = name
        self.lineno = lineno
        self.kind = kind            # record | op
        self.flags = set()
        self.waits = None           # (field, is_event, (field, const) or None)
        self.fields = {"in": [], "out": []}
        self.doc = []


class Spec:
    def __init__(self, text):
        self.consts = []            # (name, value, comment)
        self.records = {}
        self.ops = {}
        self.order = []
        self.parse(text)
        self.check()

    def parse(self, text):
        cur = None
        for lineno, raw in enumerate(text.splitlines(), 1):
            line, _, comment = raw.partition("#")
            if not line.strip():
                if cur is not None and comment.strip() and raw.startswith(" "):
                    cur.doc.append(comment.strip())
                continue
            words = line.split()
            if not raw[0].isspace():
                cur = None
                if words[0] == "const" and len(words) == 3:
                    self.consts.append((words[1], words[2], comment.strip()))
                elif words[0] in ("record", "op") and len(words) >= 2:
                    cur = Record(words[1], lineno, words[0])
                    if comment.strip():
                        cur.doc.append(comment.strip())
                    when = None
                    for w in words[2:]:
                        if words[0] == "op" and w in OP_FLAGS:
                            cur.flags.add(w)
                        elif words[0] == "op" and re.match(r"^waits(_event)?=\w+$", w):
                            k, v = w.split("=")
                            cur.waits = (v, k == "waits_event", None)
                        elif words[0] == "op" and re.match(r"^when=\w+==\w+$", w):
                            when = tuple(w[5:].split("=="))
                        else:
                            raise MessageError("MESSAGES line %d: unknown word %r" % (lineno, w))
                    if when and not cur.waits:
                        raise MessageError("MESSAGES line %d: when= needs waits=" % lineno)
                    if cur.waits:
                        cur.waits = (cur.waits[0], cur.waits[1], when)
                        if "blocking" not in cur.flags:
                            raise MessageError("MESSAGES line %d: waits= is for blocking ops" % lineno)
                    table = self.records if words[0] == "record" else self.ops
                    if cur.name in table:
                        raise MessageError("MESSAGES line %d: %s defined twice" % (lineno, cur.name))
                    table[cur.name] = cur
                    self.order.append(cur)
                else:
                    raise MessageError("MESSAGES line %d: expected const, record or op" % lineno)
                continue
            if cur is None:
                raise MessageError("MESSAGES line %d: field outside a record or op" % lineno)
            if cur.kind == "op":
                if words[0] not in ("in", "out"):
                    raise MessageError("MESSAGES line %d: an op's field starts with in or out" % lineno)
                f = Field(line.strip()[len(words[0]):].strip(), lineno)
                f.comment = comment.strip()
                cur.fields[words[0]].append(f)
            else:
                f = Field(line.strip(), lineno)
                f.comment = comment.strip()
                cur.fields["in"].append(f)

    def check(self):
        for rec in self.order:
            for d, fields in rec.fields.items():
                names = set()
                for f in fields:
                    if f.name in names:
                        raise MessageError("MESSAGES line %d: %s twice" % (f.lineno, f.name))
                    names.add(f.name)
                    base = f.type.split(":")[0]
                    if base not in SCALARS and base not in ("str", "bytes", "raw") and f.type not in self.records:
                        raise MessageError("MESSAGES line %d: unknown type %s" % (f.lineno, f.type))
                    if f.type in self.records and self.order.index(self.records[f.type]) > self.order.index(rec):
                        raise MessageError("MESSAGES line %d: record %s is defined later" % (f.lineno, f.type))
                    if f.bulk and rec.kind != "op":
                        raise MessageError("MESSAGES line %d: bulk is for an op's field" % f.lineno)
                if rec.kind == "op" and d == "in" and rec.waits:
                    wanted = [rec.waits[0]] + ([rec.waits[2][0]] if rec.waits[2] else [])
                    for w in wanted:
                        if w not in names:
                            raise MessageError("%s: waits/when name a request field it lacks: %s" % (rec.name, w))
                bulk = [f for f in fields if f.bulk]
                if len(bulk) > 1:
                    raise MessageError("%s: at most one bulk field per direction" % rec.name)
                if bulk and d == "in" and fields[-1] is not bulk[0]:
                    raise MessageError("%s: a request's bulk field comes last" % rec.name)
                if bulk and d == "out" and fields[0] is not bulk[0]:
                    raise MessageError("%s: a reply's bulk field comes first" % rec.name)

    # ---- sizes ------------------------------------------------------------------

    def fixed_size(self, f):
        """Wire bytes of a field of fixed size, else None."""
        if f.var or f.type in ("str", "bytes"):
            return None
        base = f.type.split(":")[0]
        if base == "raw":
            return None  # sizeof(T): known to C, not to Python
        if f.type in self.records:
            one = self.record_size(self.records[f.type])
        else:
            one = SCALARS[f.type][1]
        if one is None:
            return None
        if f.fixed:
            if not f.fixed.isdigit():
                return None
            return one * int(f.fixed)
        return one

    def record_size(self, rec):
        total = 0
        for f in rec.fields["in"]:
            s = self.fixed_size(f)
            if s is None:
                return None
            total += s
        return total

    def min_size(self, f):
        """Fewest wire bytes field f can take."""
        return 4 if f.var else self.elem_min_size(f)  # an empty array: its count

    def elem_min_size(self, f):
        """Fewest wire bytes one element of f can take (bounds a count)."""
        if f.type in ("str",):
            return 1
        if f.type == "bytes":
            return 8
        base = f.type.split(":")[0]
        if base == "raw":
            return 1
        if f.type in self.records:
            return max(1, sum(self.min_size(g) for g in self.records[f.type].fields["in"]))
        n = SCALARS[f.type][1]
        if f.fixed and f.fixed.isdigit():
            n *= int(f.fixed)
        return n

    def bulk_head(self, op):
        """For an op whose request ends in a bulk field: the bytes before
        the bulk bytes (every field and the length), when they are fixed."""
        fields = op.fields["in"]
        if not fields or not fields[-1].bulk:
            return 0
        total = 8
        for f in fields[:-1]:
            s = self.fixed_size(f)
            if s is None:
                return 0  # the session cannot find the bytes without decoding: never staged
            total += s
        return total


# ---- C emitters -------------------------------------------------------------

def ctype(spec, f):
    if f.type in SCALARS:
        return SCALARS[f.type][0]
    if f.type.startswith("raw:"):
        return f.type[4:]
    if f.type in spec.records:
        return "struct msg_%s" % f.type
    raise MessageError("no C type for %s" % f.type)


def member(spec, f):
    if f.type == "str":
        return ["const char *%s;" % f.name]
    if f.type == "bytes":
        return ["const void *%s;" % f.name, "uint64_t %s_len;" % f.name]
    t = ctype(spec, f)
    if f.var:
        return ["const %s *%s;" % (t, f.name), "uint32_t %s_count;" % f.name]
    if f.fixed:
        return ["%s %s[%s];" % (t, f.name, f.fixed)]
    return ["%s %s;" % (t, f.name)]


def put_one(spec, f, lv, ind):
    if f.type == "handle":
        return ["%sput_handle(b, %s);" % (ind, lv)]
    if f.type in SCALARS:
        fn = WIRE_FN.get(f.type, f.type)
        return ["%swb_put_%s(b, %s);" % (ind, fn, lv)]
    if f.type.startswith("raw:"):
        return ["%swb_put_raw(b, &%s, sizeof %s);" % (ind, lv, lv)]
    return ["%smsg_put_%s(b, &%s);" % (ind, f.type, lv)]


def get_one(spec, f, lv, ind):
    if f.type in SCALARS:
        fn = WIRE_FN.get(f.type, f.type)
        return ["%s%s = wr_%s(r);" % (ind, lv, fn)]
    if f.type.startswith("raw:"):
        return ["%swr_raw(r, &%s, sizeof %s);" % (ind, lv, lv)]
    return ["%smsg_get_%s(r, a, &%s);" % (ind, f.type, lv)]


def put_field(spec, f, d):
    m = "m->" + f.name
    if f.type == "str":
        return ["    wb_put_str(b, %s);" % m]
    if f.type == "bytes":
        if f.bulk and d == "in":
            return ["    wb_put_u64(b, %s_len); /* the bytes follow the frame (rpc_call.bulk) */" % m]
        if f.bulk:
            return ["    /* %s: the session sends it ahead of the other fields (srv_call.bulk) */" % f.name]
        return ["    wb_put_blob(b, %s, %s_len);" % (m, m)]
    if f.var:
        return ["    wb_put_u32(b, %s_count);" % m,
                "    for (uint32_t i = 0; i < %s_count; i++)" % m] + put_one(spec, f, m + "[i]", "        ")
    if f.fixed and f.type == "u8":
        return ["    wb_put_raw(b, %s, sizeof %s);" % (m, m)]
    if f.fixed:
        return ["    for (size_t i = 0; i < sizeof %s / sizeof %s[0]; i++)" % (m, m)] + \
            put_one(spec, f, m + "[i]", "        ")
    return put_one(spec, f, m, "    ")


def get_field(spec, f, d):
    m = "m->" + f.name
    if f.type == "str":
        return ["    %s = wr_str(r);" % m]
    if f.type == "bytes":
        if f.bulk and d == "in":
            return ["    %s_len = wr_u64(r);" % m,
                    "    %s = a->bulk_apart ? NULL : wr_view(r, (size_t)%s_len);" % (m, m)]
        if f.bulk:
            return ["    if (a->bulk_apart) {",
                    "        %s = NULL; /* received into rpc_call.sink */" % m,
                    "        %s_len = a->bulk_len;" % m,
                    "    } else {",
                    "        size_t n = 0;",
                    "        %s = wr_blob(r, &n);" % m,
                    "        %s_len = n;" % m,
                    "    }"]
        return ["    {", "        size_t n = 0;", "        %s = wr_blob(r, &n);" % m, "        %s_len = n;" % m, "    }"]
    if f.var:
        t = ctype(spec, f)
        return ["    {",
                "        uint32_t n = wr_u32(r);",
                "        %s *v = NULL;" % t,
                "        if (n > (uint32_t)(%s) || n > r->left / %d)" % (f.max, spec.elem_min_size(f)),
                "            r->bad = 1;",
                "        else if (n && !(v = msg_alloc(a, (size_t)n * sizeof *v)))",
                "            r->bad = 1;",
                "        if (r->bad)",
                "            n = 0;",
                "        for (uint32_t i = 0; i < n; i++)"] + get_one(spec, f, "v[i]", "            ") + \
               ["        %s = v;" % m, "        %s_count = n;" % m, "    }"]
    if f.fixed and f.type == "u8":
        return ["    wr_raw(r, %s, sizeof %s);" % (m, m)]
    if f.fixed:
        return ["    for (size_t i = 0; i < sizeof %s / sizeof %s[0]; i++)" % (m, m)] + \
            get_one(spec, f, m + "[i]", "        ")
    return get_one(spec, f, m, "    ")


def field_doc(spec, f):
    t = f.type
    if f.var:
        t = "u32 count, then %s[] (at most %s)" % (f.type, f.max)
    elif f.fixed:
        t = "%s[%s]" % (f.type, f.fixed)
    elif f.type == "bytes":
        t = "u64 length + bytes" + (" (bulk)" if f.bulk else "")
    return "%s %s%s" % (t, f.name, (": " + f.comment) if f.comment else "")


BANNER = "/* GENERATED by codegen/gen_driver.py from cuda.h and codegen/driver_spec.py \u2014 DO NOT EDIT. */\n"


def header(spec):
    o = [BANNER,
         "/* messages.gen.h - the typed request and reply of every hand-written op,\n"
         " * with one encoder and one decoder each, shared by client and server.\n"
         " *\n"
         " *   struct msg_scuda_launch_req m = {...};\n"
         " *   msg_scuda_launch_req_put(&call.req, &m);           // client\n"
         " *   if (msg_scuda_launch_req_get(&c->in, &c->arena, &m) != 0)  // server\n"
         " *       return CUDA_ERROR_INVALID_VALUE;\n"
         " *\n"
         " * A decoder returns 0, or -1 when the payload is short, malformed or has\n"
         " * bytes left over. Strings and bytes point into the payload; arrays are\n"
         " * allocated from the arena (msg_arena.h), freed with it. */\n",
         "#ifndef SCUDA_MESSAGES_GEN_H\n#define SCUDA_MESSAGES_GEN_H\n\n",
         "#include <cuda.h>\n#include <stddef.h>\n#include <stdint.h>\n\n",
         '#include "msg_arena.h"\n#include "wire.h"\n\n']
    for name, value, comment in spec.consts:
        o.append("#define %s %s%s\n" % (name, value, ("  /* %s */" % comment) if comment else ""))
    o.append("\n")
    for rec in spec.order:
        if rec.kind == "record":
            o.extend(struct_text(spec, rec, "in", "msg_" + rec.name))
            o.append("void msg_put_%s(wire_buf *b, const struct msg_%s *m);\n" % (rec.name, rec.name))
            o.append("void msg_get_%s(wire_reader *r, struct msg_arena *a, struct msg_%s *m);\n\n"
                     % (rec.name, rec.name))
            continue
        for d in ("in", "out"):
            sname = "msg_%s_%s" % (rec.name, DIR_NAMES[d])
            o.extend(struct_text(spec, rec, d, sname))
            o.append("void %s_put(wire_buf *b, const struct %s *m);\n" % (sname, sname))
            o.append("int %s_get(wire_reader *r, struct msg_arena *a, struct %s *m);\n\n" % (sname, sname))
    o.append("#endif\n")
    return "".join(o)


def struct_text(spec, rec, d, sname):
    o = []
    what = {"in": "request", "out": "reply"}[d] if rec.kind == "op" else "record"
    doc = " ".join(rec.doc) if (d == "in" or rec.kind == "op") else ""
    o.append("/* %s %s%s */\n" % (rec.name, what, (": " + doc) if doc and d == "in" else ""))
    fields = rec.fields[d]
    if not fields:
        o.append("struct %s {\n    char none; /* no fields */\n};\n" % sname)
        return o
    o.append("struct %s {\n" % sname)
    for f in fields:
        mem = member(spec, f)
        o.append("    %s /* %s */\n" % (mem[0], field_doc(spec, f)))
        for extra in mem[1:]:
            o.append("    %s\n" % extra)
    o.append("};\n")
    return o


def source(spec):
    o = [BANNER, '#include "messages.gen.h"\n\n#include <string.h>\n\n',
         "/* A handle travels without the server tag a client of several servers\n"
         " * keeps in bits 56..61 (src/client/handle_tag.h): a server knows every\n"
         " * id untagged, and no id it makes uses those bits. */\n"
         "static void put_handle(wire_buf *b, uint64_t id) { wb_put_u64(b, id & ~(0x3full << 56)); }\n\n"]
    for rec in spec.order:
        if rec.kind == "record":
            fields = rec.fields["in"]
            o.append("void msg_put_%s(wire_buf *b, const struct msg_%s *m)\n{\n" % (rec.name, rec.name))
            for f in fields:
                o.extend(l + "\n" for l in put_field(spec, f, "in"))
            o.append("}\n\n")
            o.append("void msg_get_%s(wire_reader *r, struct msg_arena *a, struct msg_%s *m)\n{\n"
                     % (rec.name, rec.name))
            o.append("    (void)a;\n")
            for f in fields:
                o.extend(l + "\n" for l in get_field(spec, f, "in"))
            o.append("}\n\n")
            continue
        for d in ("in", "out"):
            sname = "msg_%s_%s" % (rec.name, DIR_NAMES[d])
            fields = rec.fields[d]
            o.append("void %s_put(wire_buf *b, const struct %s *m)\n{\n" % (sname, sname))
            if all(f.bulk and d == "out" for f in fields):  # none, or a reply's bulk field alone: nothing to put
                o.append("    (void)b;\n    (void)m;\n")
            for f in fields:
                o.extend(l + "\n" for l in put_field(spec, f, d))
            o.append("}\n\n")
            o.append("int %s_get(wire_reader *r, struct msg_arena *a, struct %s *m)\n{\n" % (sname, sname))
            o.append("    (void)a;\n    memset(m, 0, sizeof *m);\n")
            for f in fields:
                o.extend(l + "\n" for l in get_field(spec, f, d))
            o.append("    return wr_ok_end(r) ? 0 : -1;\n}\n\n")
    return "".join(o)


def wait_cases(spec):
    """C case labels of op_wait_target() for the ops with waits=."""
    o = []
    for op in spec.ops.values():
        if not op.waits:
            continue
        field, is_event, when = op.waits
        cond = " && m.%s == %s" % when if when else ""
        o.append("    case OP_%s: {\n"
                 "        struct msg_%s_req m;\n"
                 "        found = msg_%s_req_get(&r, &a, &m) == 0%s;\n"
                 "        *id = m.%s;\n"
                 "        *is_event = %d;\n"
                 "        break;\n"
                 "    }\n" % (op.name, op.name, op.name, cond, field, int(is_event)))
    return "".join(o)
