/* image_kernels.h - the kernels of a module image, read from its bytes.
 *
 * A load that waits for the server's answer costs a round trip, and the
 * answer's main content is the list of the image's kernels: their names,
 * in the order cuModuleEnumerateFunctions gives them, and each one's
 * parameter layout. For a cubin, the client can read both itself
 * (docs/architecture.md, 3.8.2 Loads of new images):
 *
 *   kernels   the STT_FUNC symbols marked STO_CUDA_ENTRY (0x10 in
 *             st_other), whatever their binding (static, global, weak);
 *             device functions are not listed, as the driver does not.
 *   order     a module lists them by the section index of their code,
 *             highest first; a library the other way round. That is what
 *             the driver 580 does, and nothing documents it: the server
 *             checks every list the client made against its driver's
 *             (scuda_module_load_new), so a driver that changes it is
 *             noticed, not trusted.
 *   layout    the .nv.info.<kernel> section's KPARAM_INFO records
 *             (ordinal, offset, size), checked against its PARAM_CBANK
 *             record (the bytes of the parameter bank).
 *   limits    what bounds a launch's configuration (kernel_limits): the
 *             registers per thread (the REGCOUNT records of the image's
 *             .nv.info), __launch_bounds__ (MAX_THREADS, REQNTID) and the
 *             size of .nv.shared.<kernel>.
 *
 * PTX is compiled by the driver at the load, and the compiler may refuse
 * it: its loads keep their round trip, and image_kernels refuses it. So
 * does anything it is not sure of (see image_kernels.c). */
#ifndef SCUDA_COMMON_IMAGE_KERNELS_H
#define SCUDA_COMMON_IMAGE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* What limits a launch of a kernel (docs/architecture.md, 3.8.4): from
 * these the client tells a configuration the driver certainly accepts
 * without asking (launch.c). */
struct kernel_limits {
    uint8_t known;         /* 0: not read (the load's reply gave the kernel) */
    uint32_t regs;         /* registers per thread; 0: no REGCOUNT record */
    uint32_t max_threads;  /* __launch_bounds__ (x * y * z); 0: none */
    uint32_t shared_bytes; /* .nv.shared.<kernel>: static shared memory, any reserved bytes included */
};

struct image_kernel {
    char *name;
    struct kernel_limits limits;
    uint32_t nparams;
    uint32_t param_bytes; /* the end of the last parameter */
    uint32_t *offset, *size;
};

struct image_kernels {
    uint32_t n;
    struct image_kernel *k;
};

/* The kernels of the code the driver loads from `image` on a device of
 * compute capability `arch` (major * 10 + minor; image_code picks it), in
 * a module's order, or a library's when is_library. 0 and *out (free it
 * with image_kernels_free), or -1 with why: the image fails its check,
 * its code is PTX, or the cubin is not one this reader is sure of. */
int image_kernels(const void *image, size_t len, unsigned arch, int is_library, struct image_kernels *out, char *why,
                  size_t whylen);

void image_kernels_free(struct image_kernels *k);

/* The SHA-256 of n names in order, each with its NUL: what a load the
 * client describes itself carries, and the server compares with its
 * driver's list. */
void image_kernels_digest(const char *const *names, uint32_t n, uint8_t out[32]);

#endif
