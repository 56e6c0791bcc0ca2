# Cross-compiling for arm64 (aarch64) Linux on a Debian/Ubuntu x86-64 host with the distribution's
# cross compiler (g++-aarch64-linux-gnu) and multiarch packages (libdnnl-dev:arm64, ...).
#
# Multiarch puts the arm64 libraries beside the host's in one tree, so the "sysroot" is / itself:
# libraries and CMake package files come from /usr/lib/aarch64-linux-gnu, arch-specific headers
# from /usr/include/aarch64-linux-gnu, and CMAKE_LIBRARY_ARCHITECTURE keeps find_package() and
# find_library() away from the host's /usr/lib/x86_64-linux-gnu. Programs (cmake helpers, ccache,
# python) are the host's. Test binaries run under qemu-aarch64 with the multiarch arm64 runtime
# (libc6:arm64, libstdc++6:arm64, libgomp1:arm64; see the emulator below).
# Use: cmake -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake ... (see
# scripts/check-arm64.sh, which installs everything this needs).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

# The root is / itself. It goes in CMAKE_FIND_ROOT_PATH only, not CMAKE_SYSROOT: Debian's cross
# compiler already searches / with the multiarch paths, and CMake strips CMAKE_SYSROOT from the
# front of build RPATHs, so a sysroot of "/" turns /path/to/build into the relative path
# path/to/build and the test binary cannot find libmixprec.so.
set(CMAKE_FIND_ROOT_PATH /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Lets CMake (and GoogleTest's gtest_discover_tests, and ctest) run arm64 binaries on the host.
# The loader must come from the same glibc build as the libc it loads. With libc6:arm64
# installed (the multiarch packages above need it) the binaries' interpreter
# /lib/ld-linux-aarch64.so.1 is that package's, so qemu needs no -L. Do NOT add
# "-L /usr/aarch64-linux-gnu" then: qemu would take the cross toolchain's older loader
# (libc6-arm64-cross) while libc.so.6 still comes from libc6:arm64, and that mix deadlocks
# every program that starts a second thread (OpenMP, std::thread) under qemu 7.2.
find_program(MIXPREC_QEMU_AARCH64 qemu-aarch64 REQUIRED)
if(EXISTS /lib/ld-linux-aarch64.so.1)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${MIXPREC_QEMU_AARCH64}")
else()
  # No multiarch glibc: the cross toolchain's runtime is the only arm64 one.
  set(CMAKE_CROSSCOMPILING_EMULATOR "${MIXPREC_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu")
endif()
