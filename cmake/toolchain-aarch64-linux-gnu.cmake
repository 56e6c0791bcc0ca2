# Cross-compiling for arm64 (aarch64) Linux on a Debian/Ubuntu x86-64 host with the distribution's
# cross compiler (g++-aarch64-linux-gnu) and multiarch packages (libdnnl-dev:arm64, ...).
#
# Multiarch puts the arm64 libraries beside the host's in one tree, so the "sysroot" is / itself:
# libraries and CMake package files come from /usr/lib/aarch64-linux-gnu, arch-specific headers
# from /usr/include/aarch64-linux-gnu, and CMAKE_LIBRARY_ARCHITECTURE keeps find_package() and
# find_library() away from the host's /usr/lib/x86_64-linux-gnu. Programs (cmake helpers, ccache,
# python) are the host's. Test binaries run under qemu-aarch64; -L points it at the cross
# toolchain's loader and C/C++ runtime (libc6-arm64-cross, libstdc++6-arm64-cross), and its
# loader then finds the multiarch libraries in /usr/lib/aarch64-linux-gnu.
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
find_program(MIXPREC_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "${MIXPREC_QEMU_AARCH64};-L;/usr/aarch64-linux-gnu")
