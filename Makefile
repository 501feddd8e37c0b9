# Monkey HTTP Server: the commands people type. CMake does the building.
#
#   make            build into build/ (the server is build/bin/monkey)
#   make run        build, then serve htdocs/ with conf/ on port 2001
#   make test       build, check that the server's folders call only down
#                   (tools/layers.py), then run every test on a normal and on an
#                   AddressSanitizer + UBSan build, the integration tests
#                   once more with every thread pinned to one CPU (races
#                   surface), and on the static musl build
#   make embedded   the embedded profile (docs/packaging.md, "The embedded
#                   profile": the static-file server with the logger, access,
#                   dirlisting and control plugins built in, built for size)
#                   into build-embedded/, and its stripped size against the
#                   budget of tests/size_budget.txt
#   make static     the embedded profile linked statically with musl, the
#                   skeleton plugin built in too (build-static/)
#   make fuzz       libFuzzer targets for FUZZ_SECONDS each (default 60);
#                   make test builds every target and runs each for
#                   FUZZ_CHECK_SECONDS (default 2) on its corpus (fuzz-check)
#   make features   the optional features of each build (BUILD/features.txt:
#                   what it has, and why not the rest)
#   make bench      benchmarks against nginx, lighttpd and h2o (see bench/);
#                   BENCH_ARGS=--quick for a run of under 3 minutes
#   make autobahn   the Autobahn TestSuite's fuzzing client against the Duda
#                   websocket package (tests/autobahn/run.py; several minutes,
#                   not part of make test; AUTOBAHN_CASES=1-7 for fewer)
#   make format     clang-format every C file; make format-check only checks
#   make install    install (PREFIX, default /usr/local, and DESTDIR honoured;
#                   docs/packaging.md); make uninstall removes those files
#   make deb        the Debian packages monkey, monkey-dev, monkey-duda and
#                   monkey-duda-dev (debian/) into build-deb/; make deb-test
#                   builds them and checks them (lintian, contents, the
#                   extracted server runs, the extracted duda helper builds
#                   and serves services; not part of make test)
#   make cross ARCH=aarch64|armhf   a cross build with Debian's cross
#                   compiler into build-cross-ARCH/; make cross-test ARCH=...
#                   runs its unit and integration tests under qemu-user-static
#                   (docs/packaging.md, "ARM"; not part of make test);
#                   PROFILE=embedded builds the embedded profile into
#                   build-cross-ARCH-embedded/

BUILD      ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
STATIC_BUILD ?= build-static
EMBEDDED_BUILD ?= build-embedded
DEB_BUILD  ?= build-deb
# Built into the static binary (auth needs libxcrypt, which musl does not have).
STATIC_PLUGINS ?= skeleton;logger;dirlisting;access;control
FUZZ_SECONDS ?= 60
FUZZ_CHECK_SECONDS ?= 2
# The one CPU of the pinned integration run: the first this process may use.
PIN_CPU    ?= $(shell python3 -c 'import os; print(min(os.sched_getaffinity(0)))' 2>/dev/null || echo 0)
# The CPUs of the ASan lane, which runs beside the pinned one: the others, or
# the same one on a machine with one CPU (where the lanes run in turn).
OTHER_CPUS ?= $(shell python3 -c 'import os; a = sorted(os.sched_getaffinity(0)); print(",".join(map(str, a[1:] or a)))' 2>/dev/null || echo 0)
JOBS       ?= $(shell nproc)
GENERATOR  := $(shell command -v ninja >/dev/null 2>&1 && echo "-G Ninja")
PYTHON     := $(shell python3 -c 'import pytest' >/dev/null 2>&1 && echo python3 || echo /usr/bin/python3)
C_FILES     = $(shell git ls-files '*.c' '*.h' 2>/dev/null)

.PHONY: all run test unit integration asan deps reconfigure static embedded embedded-test fuzz \
	fuzz-check features bench autobahn format format-check clean install uninstall deb deb-test \
	cross cross-test

all:
	@tools/deps.sh build
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(GENERATOR) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

# Configure again: libraries installed since the last run (nghttp2, cmocka,
# the Duda packages' ...) are found; a feature given with -D stays as given
# (cmake/auto.cmake).
reconfigure:
	@cmake -S . -B $(BUILD) $(if $(wildcard $(BUILD)/CMakeCache.txt),,$(GENERATOR)) >/dev/null
	@cmake -S . -B $(ASAN_BUILD) $(if $(wildcard $(ASAN_BUILD)/CMakeCache.txt),,$(GENERATOR)) \
		-DMK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null

# PREFIX is compiled in (the configuration and plugin directories): setting
# it configures the build again.
install:
	@tools/deps.sh build
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(GENERATOR) >/dev/null
	@$(if $(PREFIX),cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) >/dev/null)
	@cmake --build $(BUILD) -j $(JOBS)
	cmake --install $(BUILD)

uninstall:
	cmake --build $(BUILD) --target uninstall

# The packages are built from a copy of the tracked (and new, not ignored)
# files in $(DEB_BUILD)/src, so dpkg-buildpackage writes the .deb files into
# $(DEB_BUILD)/ and leaves the tree clean.
deb:
	@tools/deps.sh deb
	@rm -rf $(DEB_BUILD) && mkdir -p $(DEB_BUILD)/src
	@git ls-files -co --exclude-standard -z | xargs -0 tar cf - | tar xf - -C $(DEB_BUILD)/src
	cd $(DEB_BUILD)/src && DEB_BUILD_OPTIONS="parallel=$(JOBS) $(DEB_BUILD_OPTIONS)" \
		dpkg-buildpackage -us -uc -b
	@ls -l $(DEB_BUILD)/*.deb

deb-test: deb
	MK_DEB=$(DEB_BUILD) $(PYTHON) -m pytest -q tests/integration/install/test_deb.py

# ARM (docs/packaging.md): cmake/toolchain-$(ARCH).cmake; the target's
# OpenSSL and cmocka come from multiarch packages when they can be installed
# (tools/deps.sh cross), else the tls plugin or the unit tests are left out
# until a later make cross, which configures again, finds them.
ARCH       ?= aarch64
PROFILE    ?=
CROSS_BUILD ?= build-cross-$(ARCH)$(if $(PROFILE),-$(PROFILE))
cross:
	@case "$(ARCH)" in aarch64|armhf) ;; *) echo "make cross: ARCH=aarch64 or ARCH=armhf" >&2; exit 2 ;; esac
	@tools/deps.sh cross $(ARCH)
	@cmake -S . -B $(CROSS_BUILD) $(if $(wildcard $(CROSS_BUILD)/CMakeCache.txt),,$(GENERATOR) \
		-DCMAKE_TOOLCHAIN_FILE=$(CURDIR)/cmake/toolchain-$(ARCH).cmake) \
		$(if $(PROFILE),-DMK_PROFILE=$(PROFILE)) >/dev/null
	@cmake --build $(CROSS_BUILD) -j $(JOBS)
	@tools/cross.sh sizes $(ARCH) $(CROSS_BUILD)

cross-test: cross
	tools/cross.sh test $(ARCH) $(CROSS_BUILD)

# The bundled configuration serves HTTPS and HTTP/2 on 2443 too: the tls
# plugin needs OpenSSL, HTTP/2 nghttp2 (installed when missing and run as
# root), and the build is configured again, so that what was installed since
# the last configure is found.
run:
	@tools/deps.sh run
	@cmake -S . -B $(BUILD) $(if $(wildcard $(BUILD)/CMakeCache.txt),,$(GENERATOR)) >/dev/null
	@$(MAKE) --no-print-directory all
	$(BUILD)/bin/monkey -c conf

deps:
	@tools/deps.sh test

asan:
	@test -f $(ASAN_BUILD)/CMakeCache.txt || cmake -S . -B $(ASAN_BUILD) $(GENERATOR) \
		-DMK_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

unit: all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

integration: all
	MK_BUILD=$(BUILD) $(PYTHON) -m pytest -q tests/integration

# MK_TEST_DEPS=1: tools/deps.sh test has run (the deps target), so a test
# whose tool it provides fails without it instead of skipping (h2spec).
# The optional features of the tested builds (BUILD/features.txt) are
# printed at the end, whatever the result.
test: deps reconfigure all asan static embedded
	@echo "== layers: every call of the server goes down (tools/layers.py)"
	$(PYTHON) tools/layers.py $(BUILD)/CMakeFiles/monkeylib.dir
	@echo "== unit tests"
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@echo "== unit tests (ASan + UBSan)"
	cd $(ASAN_BUILD) && ctest --output-on-failure -j $(JOBS)
	@echo "== fuzz targets: built with clang, $(FUZZ_CHECK_SECONDS) s each on their corpus"
	@tools/deps.sh fuzz
	@CC=clang $(FUZZ_CONFIGURE)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz-targets
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_CHECK_SECONDS)
	@echo "== integration tests in two lanes: the normal build pinned to CPU $(PIN_CPU) then the embedded profile; ASan + UBSan on CPUs $(OTHER_CPUS)"
	$(PYTHON) tools/lanes.py $(BUILD)/lanes \
		'pinned=export MK_PORT_LANE=0/2; MK_TEST_DEPS=1 MK_BUILD=$(BUILD) taskset -c $(PIN_CPU) $(PYTHON) -m pytest -q tests/integration \
		  && echo "== integration tests (the embedded profile, static with musl)" \
		  && $(EMBEDDED_TESTS)' \
		'asan=MK_PORT_LANE=1/2 MK_TEST_DEPS=1 MK_BUILD=$(ASAN_BUILD) taskset -c $(OTHER_CPUS) $(PYTHON) -m pytest -q tests/integration'; \
	rc=$$?; $(SHOW_FEATURES); exit $$rc

# The embedded profile's lane of make test (docs/packaging.md, "The embedded
# profile"): the integration suite on the profile linked statically with
# musl (build-static/: what the profile leaves out skips, and its refusals
# are tested), then the static-file part of the suite and the size budget
# (tests/size_budget.txt) on the profile built against the system's C
# library (build-embedded/). make embedded-test runs it alone.
EMBEDDED_TESTS = MK_TEST_DEPS=1 MK_BUILD=$(STATIC_BUILD) MK_STATIC=1 taskset -c $(PIN_CPU) $(PYTHON) -m pytest -q \
		tests/integration --ignore=tests/integration/tools/test_watch.py \
	&& echo "== the static-file tests and the size budget (the embedded profile, $(EMBEDDED_BUILD))" \
	&& MK_TEST_DEPS=1 MK_BUILD=$(EMBEDDED_BUILD) MK_STATIC=1 taskset -c $(PIN_CPU) $(PYTHON) -m pytest -q \
		$(EMBEDDED_STATIC_FILES)
EMBEDDED_STATIC_FILES = tests/integration/http/test_basic.py tests/integration/static/test_static.py \
	tests/integration/static/test_cache_headers.py tests/integration/static/test_precompressed.py \
	tests/integration/static/test_file_cache_body.py tests/integration/http/test_keepalive.py \
	tests/integration/plugins/test_dirlisting.py tests/integration/install/test_profile.py
embedded-test: static embedded
	$(EMBEDDED_TESTS)

# What each build has (written by its last configure: cmake/auto.cmake).
SHOW_FEATURES = for b in $(BUILD) $(ASAN_BUILD) $(STATIC_BUILD) $(EMBEDDED_BUILD) $(FUZZ_BUILD); do \
	if [ -f $$b/features.txt ]; then \
		echo "== optional features of $$b"; \
		grep -v '^\#' $$b/features.txt | awk -F '\t' '{ printf "  %-22s %-3s  %s\n", $$1, $$2, $$3 }'; \
	fi; \
	done
features:
	@$(SHOW_FEATURES)

# Configured at each run with the profile's options, so that a build
# directory made before the profile existed becomes one.
static:
	@tools/deps.sh static
	@CC=musl-gcc cmake -S . -B $(STATIC_BUILD) $(if $(wildcard $(STATIC_BUILD)/CMakeCache.txt),,$(GENERATOR)) \
		-DMK_PROFILE=embedded -DMK_STATIC=ON -DMK_SHARED_PLUGINS=none -DMK_TESTS=OFF \
		-DCMAKE_BUILD_TYPE=MinSizeRel "-DMK_BUILTIN_PLUGINS=$(STATIC_PLUGINS)" >/dev/null
	@cmake --build $(STATIC_BUILD) -j $(JOBS) --target monkey
	@cp $(STATIC_BUILD)/bin/monkey $(STATIC_BUILD)/bin/monkey-stripped && strip $(STATIC_BUILD)/bin/monkey-stripped
	@ls -l $(STATIC_BUILD)/bin/monkey-stripped

embedded:
	@cmake -S . -B $(EMBEDDED_BUILD) $(if $(wildcard $(EMBEDDED_BUILD)/CMakeCache.txt),,$(GENERATOR)) \
		-DMK_PROFILE=embedded >/dev/null
	@cmake --build $(EMBEDDED_BUILD) -j $(JOBS) --target monkey
	@$(PYTHON) tools/size_budget.py $(EMBEDDED_BUILD)

# The libFuzzer targets (tests/fuzz/CMakeLists.txt) with clang, and nothing
# else of the tree; configured again each time, so that a target whose
# library was installed since (fuzz_h2 with nghttp2) is built.
FUZZ_CONFIGURE = cmake -S . -B $(FUZZ_BUILD) $(if $(wildcard $(FUZZ_BUILD)/CMakeCache.txt),,$(GENERATOR) \
	-DMK_FUZZ=ON -DMK_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo) >/dev/null
fuzz:
	@tools/deps.sh fuzz
	@CC=clang $(FUZZ_CONFIGURE)
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz-targets
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# Part of make test: every target builds and runs FUZZ_CHECK_SECONDS on its
# corpus, so that none rots unnoticed (a target that no longer compiles, a
# corpus input that now crashes).
fuzz-check:
	@echo "== fuzz targets: built with clang, $(FUZZ_CHECK_SECONDS) s each on their corpus"
	@tools/deps.sh fuzz
	@CC=clang $(FUZZ_CONFIGURE)
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz-targets
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_CHECK_SECONDS)

BENCH_ARGS ?=
bench: all
	bench/run.sh $(BENCH_ARGS)

AUTOBAHN_CASES ?= 1-7,9,10,12,13
autobahn: all
	python3 tests/autobahn/run.py --build $(BUILD) --cases $(AUTOBAHN_CASES)

format:
	clang-format -i $(C_FILES)

format-check:
	clang-format --dry-run -Werror $(C_FILES)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(STATIC_BUILD) $(EMBEDDED_BUILD) $(DEB_BUILD) build-cross-*
