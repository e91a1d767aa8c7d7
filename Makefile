# sluice - top-level build. `make run` (quick start), `make test` (all tests), `make asan`.
CC      ?= gcc
BUILD   ?= build
BIN     ?= bin
OPT     ?= -O2
SAN     ?=
PKGS    := rdkafka jansson libsodium libcurl sqlite3 libmicrohttpd libpcre2-8

PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null)

CFLAGS  := -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -Wshadow -g $(OPT) $(SAN) \
           -Icommon $(PKG_CFLAGS)
LDFLAGS := $(SAN)
LDLIBS   = $(PKG_LIBS) -lm -lpthread

# Each process is main.c plus its modules; modules (everything but main.c) are also linked into
# the unit tests so they can be called without Kafka or a network.
COMMON_OBJ     := $(patsubst %.c,$(BUILD)/%.o,$(wildcard common/*.c))
INGEST_OBJ     := $(patsubst %.c,$(BUILD)/%.o,$(filter-out ingest/main.c,$(wildcard ingest/*.c)))
SCHEDULER_OBJ  := $(patsubst %.c,$(BUILD)/%.o,$(filter-out scheduler/main.c,$(wildcard scheduler/*.c)))
DISPATCHER_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(filter-out dispatcher/main.c,$(wildcard dispatcher/*.c)))
SIM_OBJ        := $(patsubst %.c,$(BUILD)/%.o,$(filter-out ops/sim/main.c,$(wildcard ops/sim/*.c)))
CLI_OBJ        := $(patsubst %.c,$(BUILD)/%.o,$(filter-out ops/cli/main.c,$(wildcard ops/cli/*.c)))
MODULE_OBJ     := $(INGEST_OBJ) $(SCHEDULER_OBJ) $(DISPATCHER_OBJ) $(SIM_OBJ) $(CLI_OBJ) $(COMMON_OBJ)

PROGRAMS := $(BIN)/sluice-devkafka $(BIN)/sluice-sim $(BIN)/sluice-ingest \
            $(BIN)/sluice-scheduler $(BIN)/sluice-dispatcher $(BIN)/sluice
UNIT_TESTS := $(patsubst tests/%.c,$(BIN)/tests/%,$(wildcard tests/test_*.c))
E2E_DRIVERS := $(patsubst tests/e2e/%.c,$(BIN)/tests/%,$(wildcard tests/e2e/e2e_*.c))
BENCH := $(patsubst bench/%.c,$(BIN)/bench/%,$(wildcard bench/*.c))
BENCH_LIB_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard bench/lib/*.c))
TEST_LIB_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/lib/*.c))

.PHONY: all deps run test test-bins test-unit test-ops test-bench-help test-e2e asan asan-e2e bench clean format \
        fuzz fuzz-build fuzz-bins
all: $(PROGRAMS) $(UNIT_TESTS) $(E2E_DRIVERS) $(BENCH)

deps:
	@bash ops/install-deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# The console's files are built into the scheduler (.incbin), so their object follows them.
$(BUILD)/scheduler/console_assets.o: $(wildcard scheduler/console/*)

$(BIN)/sluice-devkafka: $(BUILD)/ops/devkafka/main.o $(COMMON_OBJ)
$(BIN)/sluice-sim: $(BUILD)/ops/sim/main.o $(SIM_OBJ) $(COMMON_OBJ)
$(BIN)/sluice-ingest: $(BUILD)/ingest/main.o $(INGEST_OBJ) $(COMMON_OBJ)
$(BIN)/sluice-scheduler: $(BUILD)/scheduler/main.o $(SCHEDULER_OBJ) $(COMMON_OBJ)
$(BIN)/sluice-dispatcher: $(BUILD)/dispatcher/main.o $(DISPATCHER_OBJ) $(COMMON_OBJ)
$(BIN)/sluice: $(BUILD)/ops/cli/main.o $(CLI_OBJ) $(COMMON_OBJ)
$(PROGRAMS):
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BIN)/tests/%: $(BUILD)/tests/%.o $(TEST_LIB_OBJ) $(MODULE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS) $(CHECK_LIBS)

$(BIN)/tests/e2e_%: $(BUILD)/tests/e2e/e2e_%.o $(BUILD)/tests/e2e/harness.o $(BUILD)/tests/e2e/cdp.o \
                  $(COMMON_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Every bench/*.c is a program; bench/lib holds what they share.
# -iquote: scheduler/sched.h must not shadow <sched.h> (which <pthread.h> includes).
$(BUILD)/bench/%.o: CFLAGS += -Itests/e2e -iquote scheduler -Ibench/lib
$(BIN)/bench/%: $(BUILD)/bench/%.o $(BENCH_LIB_OBJ) $(BUILD)/tests/e2e/harness.o $(MODULE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Quick start: install what is missing, build, run the local stack on the example config,
# submit the example jobs and print their results, then stop the stack.
run: deps
	@$(MAKE) --no-print-directory all
	@bash ops/stack demo

test-unit: $(UNIT_TESTS)
	@bash tests/run-unit.sh $(UNIT_TESTS)

test-e2e: $(PROGRAMS) $(E2E_DRIVERS)
	@SLUICE_BIN=$(abspath $(BIN)) bash tests/run-e2e.sh $(E2E_DRIVERS)

# Operator files: Prometheus config and alert rules (with their unit tests), Grafana dashboard.
test-ops:
	@bash tests/ops-check.sh

# Every benchmark program answers --help (and refuses an unknown option) without running.
test-bench-help: $(BENCH)
	@bash tests/bench-help.sh $(BENCH)

# All tests: unit tests, end-to-end tests of the real processes, then both again with every
# binary built with AddressSanitizer + UndefinedBehaviorSanitizer (leaks included).
# The builds run on every core (the tests themselves one after another: several drivers measure
# timing and throughput).
NPROC := $(shell nproc 2>/dev/null || echo 2)
test: deps
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@$(MAKE) --no-print-directory test-unit
	@$(MAKE) --no-print-directory test-ops
	@$(MAKE) --no-print-directory test-bench-help
	@$(MAKE) --no-print-directory test-e2e
	@$(MAKE) --no-print-directory -j$(NPROC) $(ASAN_VARS) test-bins
	@$(MAKE) --no-print-directory asan
	@$(MAKE) --no-print-directory asan-e2e

# What the sanitizer runs need, built in one go (test builds it with every core).
test-bins: $(PROGRAMS) $(UNIT_TESTS) $(E2E_DRIVERS)

# CK_FORK=no runs each suite in one process so LeakSanitizer sees leaks at exit.
ASAN_VARS := BUILD=build-asan BIN=bin-asan OPT=-O1 \
	SAN="-fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer -fno-sanitize-recover=all"
asan:
	@CK_FORK=no $(MAKE) --no-print-directory $(ASAN_VARS) test-unit

# The end-to-end tests with every sluice process built with the sanitizers. The provider
# simulator stays the plain build: it stands in for a provider on other machines, and slowed
# down by the sanitizers beside them it stalled long enough to refuse calls on its own.
asan-e2e:
	@$(MAKE) --no-print-directory $(BIN)/sluice-sim
	@SLUICE_SIM_BIN=$(abspath $(BIN)) $(MAKE) --no-print-directory $(ASAN_VARS) test-e2e

# libFuzzer targets (tests/fuzz/README.md): every module built again with clang, ASan and UBSan
# and libFuzzer's coverage; each tests/fuzz/fuzz_NAME.c is one target. `make fuzz` runs each for
# FUZZ_SECONDS (default 60); `make fuzz FUZZ_TARGETS="sse config"` runs only those.
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_TARGETS ?= $(FUZZ_NAMES)
FUZZ_SECONDS ?= 60
FUZZ_VARS := CC=clang BUILD=build-fuzz BIN=bin-fuzz OPT=-O1 \
	SAN="-fsanitize=address,undefined,fuzzer-no-link -fno-omit-frame-pointer -fno-sanitize-recover=all"
$(BIN)/fuzz/fuzz_%: $(BUILD)/tests/fuzz/fuzz_%.o $(BUILD)/tests/fuzz/fuzz.o $(MODULE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS)
# Keep the targets' objects (make would delete them as intermediates and rebuild every time).
.SECONDARY: $(patsubst %,$(BUILD)/tests/fuzz/fuzz_%.o,$(FUZZ_NAMES)) $(BUILD)/tests/fuzz/fuzz.o
fuzz-bins: $(patsubst %,$(BIN)/fuzz/fuzz_%,$(FUZZ_NAMES))
fuzz-build:
	@$(MAKE) --no-print-directory $(FUZZ_VARS) fuzz-bins
fuzz: fuzz-build
	@FUZZ_SECONDS=$(FUZZ_SECONDS) bash tests/fuzz/run.sh $(patsubst %,bin-fuzz/fuzz/fuzz_%,$(FUZZ_TARGETS))

# `make bench SCENARIO="storm503 backfill"` runs only those (see bench/run.sh for the names).
bench: $(PROGRAMS) $(BENCH)
	@bash bench/run.sh $(SCENARIO)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan build-fuzz bin bin-asan bin-fuzz

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
