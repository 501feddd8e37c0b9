# Cross build for aarch64 with Debian's cross compiler (gcc-aarch64-linux-gnu):
# make cross ARCH=aarch64 (docs/packaging.md, "ARM"). The target's libraries
# come from multiarch packages (libssl-dev:<arch> ...) in /usr/lib/aarch64-linux-gnu;
# one that is not installed switches its part off (find_package, find_library).
# Programs built for the target (the unit tests) run under qemu-user-static
# with the target's multiarch C library (libc6:<arch>, which those packages
# bring): not with -L /usr/<triplet>, whose older loader would then load the
# multiarch libc.so.6 and hang or crash.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64-static)
# pkg-config (FindOpenSSL) must describe the target's libraries, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
