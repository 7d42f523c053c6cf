// glibc_compat.h: force-included (g++ -include) when the gpu-check bundle
// builds the harness in its Debian 11 root (.ci/gpu-check/gpu-check.yaml),
// so that the binary needs GLIBC 2.28 or older (RHEL/Rocky 8) and, with
// -static-libstdc++ -static-libgcc, no GLIBCXX or GCC_ version. The bundle
// build checks every binary's versions with objdump -T.
#pragma once

// libstdc++ built against glibc >= 2.30 waits on steady_clock with
// pthread_cond_clockwait (GLIBC_2.30); without the macro it converts the
// deadline and uses pthread_cond_timedwait, in glibc since 2.2.5.
#include <bits/c++config.h>
#undef _GLIBCXX_USE_PTHREAD_COND_CLOCKWAIT

// glibc 2.29 added a faster exp under a new version (GLIBC_2.29); the one
// before it is still exported under the base version of each architecture.
#if defined(__x86_64__)
__asm__(".symver exp,exp@GLIBC_2.2.5");
#elif defined(__aarch64__)
__asm__(".symver exp,exp@GLIBC_2.17");
#endif
