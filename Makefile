# idlevm — plain Makefile.  See README.md for the two entry points:
#   make demo    boot the demo guest and profile it
#   make check   unit, fuzz-regression and end-to-end tests
#
# Layout of outputs (BUILD defaults to build/, `make asan` uses build-asan/):
#   $(BUILD)/idlevm                host tool
#   $(BUILD)/libivm.a              vmm/ minus main.c, for tests and benches
#   $(BUILD)/libivmsym.a           symbols/
#   $(BUILD)/idlevm-helper         static guest helper
#   $(BUILD)/guest/*               static guest workloads
#   $(BUILD)/tests/unit-tests      Criterion unit tests (no VM)
#   $(BUILD)/fuzz/<name>-replay    fuzz targets replaying their corpus
#   $(BUILD)/fuzz/<name>           libFuzzer binaries (`make fuzz`, clang)
#   $(BUILD)/bench/<name>          benchmarks (`make bench`)

BUILD ?= build
# VERSION is the one place the version is written (idlevm --version, the
# helper's HELLO, the .deb packages); GIT_REV is the revision built from.
VERSION := $(shell cat VERSION)
GIT_REV ?= $(shell r=$$(git rev-parse --short=12 HEAD 2>/dev/null) || r=unknown; \
	[ $$r = unknown ] || git diff --quiet HEAD 2>/dev/null || r=$$r-dirty; echo $$r)
CC ?= cc
CLANG ?= clang
PKG_CONFIG ?= pkg-config

PKGS := libvirt libvirt-qemu json-c libelf libdw libdebuginfod liblzma libbpf libtraceevent libtracefs
TEST_PKGS := criterion

WARN := -Wall -Wextra -Wshadow -Wformat=2 -Wno-unused-parameter
CFLAGS ?= -O2 -g
SAN_CFLAGS ?=
IVM_CFLAGS := -std=gnu11 -D_GNU_SOURCE $(WARN) -Ivmm -Iguest-helper -Isymbols -I$(BUILD)/gen \
	$(SAN_CFLAGS) $(CFLAGS)
PKG_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS) 2>/dev/null)
PKG_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS) 2>/dev/null)
TEST_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(TEST_PKGS) 2>/dev/null)
TEST_LIBS = $(shell $(PKG_CONFIG) --libs $(TEST_PKGS) 2>/dev/null)
LIBS = $(PKG_LIBS) -lpthread -lz

# Guest binaries are static (the demo guest is a busybox initramfs) and never
# sanitized: they run inside the guest, not on the host.
GUEST_CFLAGS := -std=gnu11 -D_GNU_SOURCE $(WARN) -O2 -g -static -pthread \
	-Iguest-helper -I$(BUILD)/gen

VMM_SRCS := $(filter-out vmm/cmd/main.c %.bpf.c,$(wildcard vmm/*/*.c))
# The wire protocol codec is shared: the helper and the host use one parser.
PROTO_SRCS := $(filter-out guest-helper/helper.c guest-helper/helper_%.c,\
	$(wildcard guest-helper/*.c))
SYM_SRCS := $(wildcard symbols/*.c)
HELPER_SRCS := $(wildcard guest-helper/*.c)
UNIT_SRCS := $(wildcard tests/unit/*.c)
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
BENCH_SRCS := $(wildcard tests/bench/bench_*.c)
FUZZ_NAMES := $(patsubst tests/fuzz/%.c,%,$(FUZZ_SRCS))
BENCH_NAMES := $(patsubst tests/bench/%.c,%,$(BENCH_SRCS))

VMM_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(VMM_SRCS) $(PROTO_SRCS)) \
	$(BUILD)/obj/vmm/profile/idle_gate_obj.o
SYM_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(SYM_SRCS))
# symbols/ is linked only once it has sources (an empty archive has no index).
SYM_LIB := $(if $(SYM_SRCS),$(BUILD)/libivmsym.a)

GUEST_BINS := $(BUILD)/idlevm-helper $(BUILD)/guest/lockstorm-fp \
	$(BUILD)/guest/lockstorm-nofp $(BUILD)/guest/lockstorm-pie \
	$(BUILD)/guest/lockstorm-dyn \
	$(BUILD)/guest/spin $(BUILD)/guest/mapfiles $(BUILD)/guest/threadpark \
	$(BUILD)/guest/labelset $(BUILD)/guest/labelset-dyn \
	$(BUILD)/guest/labelset-pie $(BUILD)/guest/hostile

.PHONY: all deps deps-demo check unit fuzz-replay e2e e2e-demo image-bullseye e2e-kernels e2e-web01 web01 fuzz fuzz-long \
	mutate-long bench \
	asan demo image unit-kernel clean \
	guest workloads-check asan-check FORCE

all: $(BUILD)/idlevm guest

guest: $(GUEST_BINS)

# make check installs everything its tests use; make demo only what the
# demo needs (no Chromium, Go, clang...).
deps:
	@scripts/install-deps all

deps-demo:
	@scripts/install-deps demo

# Rewritten only when VERSION or the git revision changes, so a commit
# relinks idlevm and the helper but rebuilds nothing else.
$(BUILD)/gen/ivm_version.h: FORCE
	@mkdir -p $(dir $@)
	@printf '#define IVM_VERSION "%s"\n#define IVM_GIT_REV "%s"\n' \
		'$(VERSION)' '$(GIT_REV)' >$@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; fi

FORCE:

$(BUILD)/obj/vmm/cmd/main.o $(BUILD)/obj/vmm/cmd/cmd_doctor.o: $(BUILD)/gen/ivm_version.h

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(IVM_CFLAGS) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

# The idle gate's BPF program, built for the BPF target and carried inside
# idlevm (vmm/profile/idle_gate.h).  -g: libbpf needs the BTF of its maps.
GATE_BPF := $(BUILD)/obj/vmm/profile/idle_gate.bpf.o
$(GATE_BPF): vmm/profile/idle_gate.bpf.c vmm/profile/idle_gate_abi.h
	@mkdir -p $(dir $@)
	clang -O2 -g -target bpf -Wall -Ivmm/profile \
		-I/usr/include/$(shell $(CC) -dumpmachine) -c -o $@ $<

$(BUILD)/obj/vmm/profile/idle_gate_obj.o: vmm/profile/idle_gate_obj.S $(GATE_BPF)
	$(CC) -DIVM_IDLE_GATE_OBJ='"$(GATE_BPF)"' -c -o $@ $<

$(BUILD)/libivm.a: $(VMM_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libivmsym.a: $(SYM_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/idlevm: $(BUILD)/obj/vmm/cmd/main.o $(BUILD)/libivm.a $(SYM_LIB)
	$(CC) $(SAN_CFLAGS) -o $@ $^ $(LIBS)

$(BUILD)/idlevm-helper: $(HELPER_SRCS) $(wildcard guest-helper/*.h) \
		$(BUILD)/gen/ivm_version.h
	@mkdir -p $(dir $@)
	$(CC) $(GUEST_CFLAGS) -Os -o $@ $(HELPER_SRCS)

$(BUILD)/guest/lockstorm-fp: tests/workloads/lockstorm.c
	@mkdir -p $(dir $@)
	$(CC) $(GUEST_CFLAGS) -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -o $@ $<

$(BUILD)/guest/lockstorm-nofp: tests/workloads/lockstorm.c
	@mkdir -p $(dir $@)
	$(CC) $(GUEST_CFLAGS) -fomit-frame-pointer -o $@ $<

# A position-independent static executable, loaded at a random address:
# user unwinding and symbolization must find its load bias.
$(BUILD)/guest/lockstorm-pie: tests/workloads/lockstorm.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -static,$(GUEST_CFLAGS)) -fomit-frame-pointer -fPIE -static-pie \
		-o $@ $<

$(BUILD)/guest/mapfiles: tests/workloads/mapfiles.c
	@mkdir -p $(dir $@)
	$(CC) $(GUEST_CFLAGS) -o $@ $<

# Dynamically linked against the guest's (the host's: Debian 12's) libc,
# without frame pointers, as distribution servers are: user stacks through
# libc need its CFI from guest memory.
$(BUILD)/guest/lockstorm-dyn: tests/workloads/lockstorm.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -static,$(GUEST_CFLAGS)) -fomit-frame-pointer -o $@ $<

$(BUILD)/guest/labelset: tests/workloads/labelset.c
	@mkdir -p $(dir $@)
	$(CC) $(GUEST_CFLAGS) -o $@ $<

$(BUILD)/guest/labelset-pie: tests/workloads/labelset.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -static,$(GUEST_CFLAGS)) -fPIE -static-pie -o $@ $<

# Dynamically linked against the guest's libc (the host's: Debian 12's, as
# the demo image carries it): glibc's layout from the libc itself.
$(BUILD)/guest/labelset-dyn: tests/workloads/labelset.c
	@mkdir -p $(dir $@)
	$(CC) $(filter-out -static,$(GUEST_CFLAGS)) -o $@ $<

$(BUILD)/guest/threadpark: tests/workloads/threadpark.c
	@mkdir -p $(dir $@)
	$(CC) $(GUEST_CFLAGS) -o $@ $<

# An unprivileged program that attacks idlevm through what it controls
# (tests/e2e/web01/t_70_hostile.sh).
$(BUILD)/guest/hostile: tests/workloads/hostile.c
	@mkdir -p $(dir $@)
	$(CC) $(GUEST_CFLAGS) -o $@ $<

$(BUILD)/guest/spin: tests/workloads/spin.c
	@mkdir -p $(dir $@)
	$(CC) $(GUEST_CFLAGS) -fno-omit-frame-pointer -o $@ $<

# ---- tests ---------------------------------------------------------------

$(BUILD)/tests/unit-tests: $(patsubst %.c,$(BUILD)/obj/%.o,$(UNIT_SRCS)) \
		$(BUILD)/libivm.a $(SYM_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(SAN_CFLAGS) -o $@ $^ $(LIBS) $(TEST_LIBS)

$(BUILD)/obj/tests/unit/%.o: tests/unit/%.c
	@mkdir -p $(dir $@)
	$(CC) $(IVM_CFLAGS) $(PKG_CFLAGS) $(TEST_CFLAGS) -MMD -MP -c -o $@ $<

# The KVM end-to-end test's recorder of KVM tracepoint records (and of the
# unit tests' fixtures): tests/tools/kvm-records.c.
$(BUILD)/tests/kvm-records: $(BUILD)/obj/tests/tools/kvm-records.o \
		$(BUILD)/libivm.a $(SYM_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(SAN_CFLAGS) -o $@ $^ $(LIBS)

# The mutation harness over a real guest's core (tests/tools/core-mutate.c):
# it runs idlevm, it links nothing of it.
$(BUILD)/tests/core-mutate: $(BUILD)/obj/tests/tools/core-mutate.o
	@mkdir -p $(dir $@)
	$(CC) $(SAN_CFLAGS) -o $@ $^

$(BUILD)/obj/tests/tools/%.o: tests/tools/%.c
	@mkdir -p $(dir $@)
	$(CC) $(IVM_CFLAGS) $(PKG_CFLAGS) -MMD -MP -c -o $@ $<

# Replay build of each fuzz target: the same LLVMFuzzerTestOneInput, driven
# over the checked-in corpus by tests/fuzz/replay.c, so `make check` keeps
# every input that once found a bug.
$(BUILD)/fuzz/%-replay: $(BUILD)/obj/tests/fuzz/%.o $(BUILD)/obj/tests/fuzz/replay.o \
		$(BUILD)/libivm.a $(SYM_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(SAN_CFLAGS) -o $@ $^ $(LIBS)

# libFuzzer build (clang), for fuzzing sessions: make fuzz; then
#   build/fuzz/fuzz_qmp tests/fuzz/corpus/fuzz_qmp
FUZZ_FLAGS := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
	-DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
$(BUILD)/fuzz/%: tests/fuzz/%.c $(VMM_SRCS) $(PROTO_SRCS) $(SYM_SRCS) \
		$(BUILD)/gen/ivm_version.h
	@mkdir -p $(dir $@)
	$(CLANG) -std=gnu11 -D_GNU_SOURCE -g -O1 -Ivmm -Iguest-helper -Isymbols -I$(BUILD)/gen \
		$(PKG_CFLAGS) $(FUZZ_FLAGS) -o $@ $< $(VMM_SRCS) $(PROTO_SRCS) \
		$(SYM_SRCS) $(LIBS)

fuzz: $(addprefix $(BUILD)/fuzz/,$(FUZZ_NAMES))

# Fuzzing at length (tests/fuzz/fuzz-long): every target (or FUZZ_TARGETS)
# for FUZZ_RUNS executions each, or FUZZ_TIME seconds each when set, with
# its dictionary; new coverage is merged into tests/fuzz/corpus/.
FUZZ_RUNS ?= 10000000
FUZZ_TIME ?=
FUZZ_TARGETS ?= $(FUZZ_NAMES)
fuzz-long: $(addprefix $(BUILD)/fuzz/,$(FUZZ_TARGETS))
	@BUILD=$(BUILD) FUZZ_RUNS=$(FUZZ_RUNS) FUZZ_TIME=$(FUZZ_TIME) \
		tests/fuzz/fuzz-long $(FUZZ_TARGETS); fuzz=$$?; \
	$(MAKE) --no-print-directory mutate-long; mutate=$$?; \
	[ $$fuzz = 0 ] && [ $$mutate = 0 ]

# The whole tool over a core of the demo guest with MUTATE_COUNT of the
# words it reads changed (tests/e2e/t_41_core_mutate.sh, at length; about
# 0.3-0.45 s a mutation here), under the ASan + UBSan build.
MUTATE_COUNT ?= 3000
mutate-long: all image $(BUILD)/tests/core-mutate
	@$(MAKE) --no-print-directory -j2 asan
	@BUILD=$(BUILD) IVM_MUTATE_COUNT=$(MUTATE_COUNT) \
		IVM_TEST_TIMEOUT=$$(($(MUTATE_COUNT) + 300)) \
		tests/e2e/run t_41_core_mutate

$(BUILD)/bench/%: $(BUILD)/obj/tests/bench/%.o $(BUILD)/libivm.a $(SYM_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(SAN_CFLAGS) -o $@ $^ $(LIBS)

bench: $(addprefix $(BUILD)/bench/,$(BENCH_NAMES)) $(BUILD)/idlevm guest
	@echo "benchmarks built in $(BUILD)/bench; see tests/bench/README.md"

unit: $(BUILD)/tests/unit-tests $(BUILD)/idlevm
	$(BUILD)/tests/unit-tests --jobs 2

fuzz-replay: $(addsuffix -replay,$(addprefix $(BUILD)/fuzz/,$(FUZZ_NAMES)))
	@set -e; for f in $(FUZZ_NAMES); do \
		$(BUILD)/fuzz/$$f-replay tests/fuzz/corpus/$$f; \
	done

# The demo workloads keep their promises: real frames (with and without
# frame pointers) and the designed 60/30/10 blocking split, run natively.
workloads-check: $(BUILD)/guest/lockstorm-fp $(BUILD)/guest/lockstorm-nofp
	tests/workloads/check-frames $(BUILD)
	tests/workloads/check-split $(BUILD)/guest/lockstorm-fp 6

image: guest
	@BUILD=$(BUILD) images/build-image

# The unit tests' real kernel data (cores, stacks, offsets) was taken from
# this build of Debian 12's cloud kernel: its vmlinux, System.map and module
# debuginfo, fetched while Debian's archive has it, whatever kernel the demo
# guest boots now.  Without it those tests skip and say so.
UNIT_KVER := 6.1.0-56-cloud-amd64
unit-kernel:
	@IVM_KVER=$(UNIT_KVER) IVM_KERNEL_ONLY=1 BUILD=$(BUILD) \
		images/build-image || \
		echo "warning: kernel $(UNIT_KVER) not fetched: unit tests of real kernel data will skip" >&2

# The demo guest's image with Debian 11's kernel too: t_98 restarts the
# guest into it (a kernel change across boots).
image-bullseye: guest
	@BUILD=$(BUILD) IVM_GUEST_SUITE=bullseye images/build-image

# The web01 guest: a Debian 12 server image with the helper installed from
# its package (images/build-web01; cached, rebuilt when an input changes).
web01: image deb-helper
	@BUILD=$(BUILD) images/build-web01

# Both test guests, then the demo guest on the other kernels, one after
# the other (two TCG guests at once would share the two cores); fails if
# any suite failed.
e2e: all image image-bullseye web01 $(BUILD)/tests/core-mutate $(BUILD)/tests/kvm-records
	@BUILD=$(BUILD) tests/e2e/run; demo=$$?; \
	BUILD=$(BUILD) IVM_E2E_GUEST=web01 tests/e2e/run; web01=$$?; \
	$(MAKE) --no-print-directory e2e-kernels; kernels=$$?; \
	[ $$demo = 0 ] && [ $$web01 = 0 ] && [ $$kernels = 0 ]

e2e-demo: all image image-bullseye $(BUILD)/tests/core-mutate $(BUILD)/tests/kvm-records
	@BUILD=$(BUILD) tests/e2e/run

# The demo guest on the other guest kernels people run: Debian 11's 5.10
# (before the maple tree) and Debian 13's 6.12, each fetched once into the
# kernel cache.  The tests of what differs between kernels: info, ps,
# maps, stack, a profile against the guest's trace, labels.
KERNEL_SUITES ?= bullseye trixie
KERNEL_TESTS ?= t_00 t_20 t_30 t_43 t_45 t_52 t_62_idle t_63_labels_class
e2e-kernels: all
	@rc=0; for s in $(KERNEL_SUITES); do \
		BUILD=$(BUILD) IVM_GUEST_SUITE=$$s images/build-image || { rc=1; continue; }; \
		BUILD=$(BUILD) IVM_IMAGE_ENV=$(BUILD)/guest-$$s/image.env \
			tests/e2e/run $(KERNEL_TESTS) || rc=1; \
	done; exit $$rc

e2e-web01: all web01
	@BUILD=$(BUILD) IVM_E2E_GUEST=web01 tests/e2e/run

check: deps
	@scripts/check-layers
	@$(MAKE) --no-print-directory -j2 all $(BUILD)/tests/unit-tests $(BUILD)/tests/kvm-records \
		$(BUILD)/tests/core-mutate \
		$(addsuffix -replay,$(addprefix $(BUILD)/fuzz/,$(FUZZ_NAMES)))
	@# The images first, and the unit tests' kernel (unit-kernel), whose
	@# vmlinux the tests of the ORC, BTF and DWARF readers use for real data.
	@$(MAKE) --no-print-directory image web01 unit-kernel
	@$(MAKE) --no-print-directory unit fuzz-replay workloads-check man-check
	@$(MAKE) --no-print-directory -j2 asan
	@$(MAKE) --no-print-directory asan-check
	@$(MAKE) --no-print-directory e2e

# The unit tests and fuzz corpora again under ASan + UBSan.
asan-check:
	build-asan/tests/unit-tests --jobs 2
	@set -e; for f in $(FUZZ_NAMES); do \
		build-asan/fuzz/$$f-replay tests/fuzz/corpus/$$f; \
	done

# make demo: the lockstorm demo guest; make demo GUEST=web01: the Debian
# server guest under its load.
GUEST ?= demo
demo: deps-demo
	@$(MAKE) --no-print-directory all image $(if $(filter web01,$(GUEST)),web01)
	@BUILD=$(BUILD) GUEST=$(GUEST) images/demo

# AddressSanitizer + UndefinedBehaviorSanitizer build of the host side, unit
# tests and fuzz replays, in build-asan/.
asan:
	@$(MAKE) --no-print-directory BUILD=build-asan \
		SAN_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
		CFLAGS="-O1 -g" build-asan/idlevm build-asan/tests/unit-tests \
		$(addsuffix -replay,$(addprefix build-asan/fuzz/,$(FUZZ_NAMES)))

clean:
	rm -rf build build-asan

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# Keep objects of chained rules (fuzz and bench objects) between runs.
.SECONDARY:

# ---- install and Debian packages ------------------------------------------
# make install [PREFIX=/usr/local] [DESTDIR=]; make uninstall the same way.
# make deb: build/idlevm_VERSION_amd64.deb (host) and
# build/idlevm-helper_VERSION_amd64.deb (guest), see packaging/build-deb.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
MANDIR ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
DEB_MAINTAINER ?= The idlevm authors <idlevm@example.org>

.PHONY: install install-host install-helper uninstall deb deb-host deb-helper \
	man-check

install: install-host install-helper

install-host: $(BUILD)/idlevm
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(BASHCOMPDIR)
	install -m 0755 $(BUILD)/idlevm $(DESTDIR)$(BINDIR)/idlevm
	sed 's/@VERSION@/$(VERSION)/' man/idlevm.1 >$(DESTDIR)$(MANDIR)/man1/idlevm.1
	chmod 0644 $(DESTDIR)$(MANDIR)/man1/idlevm.1
	install -m 0644 packaging/bash-completion/idlevm $(DESTDIR)$(BASHCOMPDIR)/idlevm

install-helper: $(BUILD)/idlevm-helper
	install -d $(DESTDIR)$(SBINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(MANDIR)/man8
	install -m 0755 $(BUILD)/idlevm-helper $(DESTDIR)$(SBINDIR)/idlevm-helper
	sed 's|/usr/sbin/idlevm-helper|$(SBINDIR)/idlevm-helper|' \
		images/idlevm-helper.service >$(DESTDIR)$(UNITDIR)/idlevm-helper.service
	sed 's/@VERSION@/$(VERSION)/' man/idlevm-helper.8 \
		>$(DESTDIR)$(MANDIR)/man8/idlevm-helper.8
	chmod 0644 $(DESTDIR)$(UNITDIR)/idlevm-helper.service \
		$(DESTDIR)$(MANDIR)/man8/idlevm-helper.8

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/idlevm $(DESTDIR)$(MANDIR)/man1/idlevm.1 \
		$(DESTDIR)$(BASHCOMPDIR)/idlevm $(DESTDIR)$(SBINDIR)/idlevm-helper \
		$(DESTDIR)$(UNITDIR)/idlevm-helper.service \
		$(DESTDIR)$(MANDIR)/man8/idlevm-helper.8

deb: deb-host deb-helper

deb-host deb-helper: deb-%: $(BUILD)/idlevm $(BUILD)/idlevm-helper
	@BUILD=$(BUILD) VERSION=$(VERSION) GIT_REV=$(GIT_REV) \
		DEB_MAINTAINER='$(DEB_MAINTAINER)' MAKE='$(MAKE)' \
		packaging/build-deb $(if $(filter host,$*),idlevm,idlevm-helper)

# Every option of every subcommand is in the man pages (tests/check-man).
man-check: $(BUILD)/idlevm $(BUILD)/idlevm-helper
	@tests/check-man $(BUILD)
