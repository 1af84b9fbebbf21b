# SPDX-License-Identifier: Apache-2.0
# The two commands a new user types (see README.md):
#   make run    set up, build, and run the loopback demo that streams and measures
#   make image  the container image, from the Debian packages, with no registry
#   make test   set up, then build and run the whole suite: plain, ASan+UBSan, TSan for the
#               concurrency tests, and a bounded libFuzzer run of each parser of untrusted input
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all setup build run image test test-plain test-asan test-tsan test-fuzz clean

all: build

setup:
	@scripts/setup.sh

build: setup
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCS_ASAN=OFF -DCS_TSAN=OFF -DCS_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build build -j $(JOBS)

run: build
	@scripts/run-demo.sh build

# The container image from the Debian packages, with no registry (docs/operations/containers.md):
# image/corestream_<version>.oci.tar, and localhost/corestream:<version> in podman's storage.
image: setup
	scripts/build-image.sh image

test: setup
	$(MAKE) test-plain test-asan test-tsan test-fuzz

test-plain:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCS_ASAN=OFF -DCS_TSAN=OFF -DCS_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build build -j $(JOBS)
	cd build && ctest --output-on-failure -j $(JOBS)

test-asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DCS_ASAN=ON -DCS_TSAN=OFF -DCS_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS)

test-tsan:
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=Debug -DCS_ASAN=OFF -DCS_TSAN=ON -DCS_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build build-tsan -j $(JOBS)
	cd build-tsan && ctest --output-on-failure -j $(JOBS) -L concurrency

# libFuzzer needs clang; only the fuzz targets are built here, each run for a bounded time.
test-fuzz:
	CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCS_ASAN=OFF -DCS_TSAN=OFF -DCS_FUZZ=ON -DCS_WERROR=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build build-fuzz -j $(JOBS) --target fuzz_targets
	cd build-fuzz && ctest --output-on-failure -j $(JOBS) -L fuzz

clean:
	rm -rf build build-asan build-tsan build-fuzz
