/* Which ARM extensions this CPU has, asked of the kernel (getauxval), and
 * the ARM table that follows from them: the run-time half of the ARM tier
 * (kernel_impl.h). One aarch64 binary runs everywhere: the dotprod and
 * i8mm kernels are compiled for those extensions file by file and called
 * only when the CPU says it has them. Not here: the kernels (dot_neon.c,
 * dot_neon_i8mm.c), x86 (its tiers are chosen at build time by -march). */
#include "kernels/kernel_impl.h"

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
/* the kernel's bits (asm/hwcap.h), spelled out for older headers */
#define ARM_HWCAP_ASIMDDP (1ul << 20)
#define ARM_HWCAP2_I8MM   (1ul << 13)

unsigned kernel_arm_caps(void) {
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    unsigned caps = 0;
    if (hw & ARM_HWCAP_ASIMDDP) caps |= KERNEL_ARM_DOTPROD;
    if ((hw & ARM_HWCAP_ASIMDDP) && (hw2 & ARM_HWCAP2_I8MM)) caps |= KERNEL_ARM_I8MM;
    return caps;
}
#else
unsigned kernel_arm_caps(void) {
    return 0;
}
#endif

const kernel_type_impl *kernel_neon_table(void) {
#if KERNEL_HAVE_NEON
    const unsigned caps = kernel_arm_caps();
    if (caps & KERNEL_ARM_I8MM) return kernel_impl_neon_i8mm;
    if (caps & KERNEL_ARM_DOTPROD) return kernel_impl_neon_dotprod;
#endif
    return NULL;
}

const char *kernel_neon_name(void) {
    const unsigned caps = kernel_arm_caps();
    if (caps & KERNEL_ARM_I8MM) return "neon-i8mm";
    return caps & KERNEL_ARM_DOTPROD ? "neon-dotprod" : "neon (no dotprod: scalar)";
}
