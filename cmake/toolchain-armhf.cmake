# Cross build for armhf with Debian's cross compiler (gcc-arm-linux-gnueabihf):
# make cross ARCH=armhf (docs/packaging.md, "ARM"). The target's libraries
# come from multiarch packages (libssl-dev:<arch> ...) in
# /usr/lib/arm-linux-gnueabihf; one that is not installed switches its part
# off (find_package, find_library).
# Programs built for the target (the unit tests) run under qemu-user-static
# with the target's multiarch C library (libc6:<arch>, which those packages
# bring): not with -L /usr/<triplet>, whose older loader would then load the
# multiarch libc.so.6 and hang or crash.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-linux-gnueabihf-gcc)
set(CMAKE_LIBRARY_ARCHITECTURE arm-linux-gnueabihf)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-arm-static)
# pkg-config (FindOpenSSL) must describe the target's libraries, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/arm-linux-gnueabihf/pkgconfig:/usr/share/pkgconfig)
