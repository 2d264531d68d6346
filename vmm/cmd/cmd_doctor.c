// SPDX-License-Identifier: MIT
/*
 * idlevm doctor: will `idlevm profile` work on this host, and on this
 * guest?  What virt-host-validate is for libvirt and `bpftool feature
 * probe` for BPF: one line per check, PASS, WARN (works, but less well)
 * or FAIL (will not work), and for each that is not a PASS the command
 * that fixes it.  The exit status says whether profile will work.
 *
 * It only looks: it mounts nothing, changes no setting, and pauses the
 * guest only as profile would when it attaches (a few milliseconds under
 * TCG, to find QEMU's copy of the registers).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/helper_client.h"
#include "access/libvirt_domain.h"
#include "access/tcg_env.h"
#include "base/caps.h"
#include "base/text_safe.h"
#include "base/version.h"
#include "cmd/commands.h"
#include "kernel/guest.h"
#include "kernel/vmcoreinfo.h"
#include "profile/capture_pin.h"
#include "profile/idle_gate.h"
#include "profile/trace_session.h"

enum verdict { PASS, WARN, FAIL };

struct doctor {
	enum verdict worst;
	unsigned int counts[3];
};

/* One check's line, and the command that fixes it (NULL: none). */
static void say(struct doctor *d, enum verdict v, const char *fix,
		const char *fmt, ...)
{
	static const char *const word[] = { "PASS", "WARN", "FAIL" };
	va_list ap;

	printf("%s  ", word[v]);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	if (v != PASS && fix)
		printf("      fix: %s\n", fix);
	d->counts[v]++;
	if (v > d->worst)
		d->worst = v;
}

static void doctor_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm doctor [--domain NAME [--connect URI] | --qmp PATH | --core FILE]\n"
"                     [options]\n"
"\n"
"Check that idlevm profile will work: on this host (privileges, tracefs and\n"
"its scheduler events, KVM, libvirt) and, with a guest, on it (monitor,\n"
"accelerator and registers, guest memory, kernel and where its symbols come\n"
"from, VMCOREINFO, the in-guest helper; for a core, what info reads).\n"
"One line per check: PASS, WARN (works, but less well) or FAIL (will not\n"
"work), each non-PASS with the command that fixes it.\n"
"Exit status 0 when profile will work, 1 when it will not.\n"
"\n"
IVM_GUEST_USAGE
"      --helper-socket PATH  the helper's socket (default: the domain's\n"
"                       channel, or helper.sock beside --qmp)\n"
"  -h, --help           this help\n");
}

/* ---- the host ------------------------------------------------------------- */

/*
 * The capabilities idlevm uses, each with what it is for (README, "What
 * idlevm needs"): root has them all; a reduced set is named cap by cap.
 * Only CAP_SYS_PTRACE decides whether profile works at all, and that is
 * the guest's check (QEMU may run as this very user): a missing one here
 * is a warning.  CAP_SYS_ADMIN is tracefs's check (only mounting it).
 */
static void check_privileges(struct doctor *d)
{
	static const struct {
		unsigned int cap;
		const char *name, *lost;
	} uses[] = {
		{ IVM_CAP_SYS_PTRACE, "CAP_SYS_PTRACE",
		  "the memory of a QEMU run by another user (libvirt's: libvirt-qemu) cannot be read" },
		{ IVM_CAP_DAC_OVERRIDE, "CAP_DAC_OVERRIDE",
		  "the in-guest helper's channel of a libvirt domain (a socket of libvirt-qemu's) cannot be opened: no pin capture, no CFI readahead" },
		{ IVM_CAP_SYS_NICE, "CAP_SYS_NICE",
		  "profile --realtime cannot raise its priority" },
	};
	char have[128] = "";
	size_t i, n = 0;

	if (geteuid() == 0 && ivm_caps_effective(IVM_CAP_SYS_PTRACE) &&
	    ivm_caps_effective(IVM_CAP_DAC_OVERRIDE) &&
	    ivm_caps_effective(IVM_CAP_SYS_NICE) &&
	    ivm_caps_effective(IVM_CAP_SYS_ADMIN)) {
		say(d, PASS, NULL, "privileges: root");
		return;
	}
	for (i = 0; i < sizeof(uses) / sizeof(uses[0]); i++) {
		if (ivm_caps_effective(uses[i].cap)) {
			n += (size_t)snprintf(have + n, sizeof(have) - n, "%s%s",
					      n ? ", " : "", uses[i].name);
			continue;
		}
		say(d, WARN, "run idlevm as root, or give it the capability (README, \"What idlevm needs\")",
		    "privileges: no %s: %s", uses[i].name, uses[i].lost);
	}
	if (n)
		say(d, PASS, NULL, "privileges: %s%s", have,
		    geteuid() == 0 ? ", as root" : "");
}

static bool readable(const char *path)
{
	return access(path, R_OK) == 0;
}

static void check_tracefs(struct doctor *d)
{
	if (!ivm_tracefs_mounted()) {
		bool admin = ivm_caps_effective(IVM_CAP_SYS_ADMIN);

		say(d, admin ? PASS : WARN,
		    "mount -t tracefs nodev " IVM_TRACEFS_DIR,
		    "tracefs: not mounted at " IVM_TRACEFS_DIR "%s",
		    admin ? "; profile mounts it itself" :
		    ", and mounting it needs CAP_SYS_ADMIN: without it profile polls the vCPU threads");
		return;
	}
	if (!readable(IVM_TRACEFS_DIR "/events/sched/sched_switch/format") ||
	    (!readable(IVM_TRACEFS_DIR "/events/sched/sched_waking/format") &&
	     !readable(IVM_TRACEFS_DIR "/events/sched/sched_wakeup/format"))) {
		say(d, WARN, "a host kernel with CONFIG_TRACEPOINTS and the sched events",
		    "tracefs: no sched_switch and sched_waking events: profile polls the vCPU threads (--idle-source thread), and sees fewer idle periods");
		return;
	}
	if (access(IVM_TRACEFS_DIR "/instances", W_OK) != 0) {
		say(d, WARN, "run idlevm as root",
		    "tracefs: cannot create a trace instance in " IVM_TRACEFS_DIR "/instances: profile polls the vCPU threads");
		return;
	}
	say(d, PASS, NULL, "tracefs: mounted, sched_switch and %s events: the sched idle source",
	    readable(IVM_TRACEFS_DIR "/events/sched/sched_waking/format") ?
	    "sched_waking" : "sched_wakeup");
	/* The disk's side (profile/disk_service.h): QEMU's I/O calls. */
	if (!readable(IVM_TRACEFS_DIR "/events/raw_syscalls/sys_enter/format") ||
	    !readable(IVM_TRACEFS_DIR "/events/raw_syscalls/sys_exit/format") ||
	    !readable(IVM_TRACEFS_DIR "/options/event-fork"))
		say(d, WARN, "a host kernel with CONFIG_FTRACE_SYSCALLS",
		    "tracefs: no raw_syscalls events or no event-fork option: profile --disk cannot time the host's service of the guest's disks");
	else
		say(d, PASS, NULL, "tracefs: raw_syscalls events and event-fork: profile --disk times the host's service of the guest's disks (QEMU's I/O calls)");
}

/* The idle gate (profile/idle_gate.h): a BPF program on sched_switch. */
static void check_idle_gate(struct doctor *d)
{
	struct ivm_error *err = ivm_idle_gate_probe();

	if (err) {
		say(d, WARN, "run idlevm as root (CAP_BPF and CAP_PERFMON) on a host kernel with BPF (CONFIG_BPF_SYSCALL, CONFIG_BPF_EVENTS), 5.18 or later",
		    "idle gate: %s: under TCG every vCPU-thread sleep wakes idlevm (about twice the wakeups)",
		    ivm_error_string(err));
		ivm_error_destroy(err);
		return;
	}
	say(d, PASS, NULL, "idle gate: a BPF program on sched_switch loads: under TCG only the vCPU sleeps after a guest switch wake idlevm");
}

static void check_kvm(struct doctor *d)
{
	FILE *f;
	long poll = -1;
	bool hw = false;
	char line[4096];
	struct stat st;

	if (access("/dev/kvm", F_OK) != 0) {
		say(d, PASS, NULL, "kvm: no /dev/kvm on this host: guests run under TCG (idlevm reads them the same way)");
		return;
	}
	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "flags", 5)) {
			hw = strstr(line, " vmx") || strstr(line, " svm");
			break;
		}
	}
	if (f)
		fclose(f);
	f = fopen("/sys/module/kvm/parameters/halt_poll_ns", "r");
	if (f) {
		if (fscanf(f, "%ld", &poll) != 1)
			poll = -1;
		fclose(f);
	}
	say(d, PASS, NULL, "kvm: /dev/kvm%s; %s", hw ? "" :
	    " without vmx/svm (a paravirtual KVM such as PVM: a guest without its support runs emulated, slowly)",
	    readable(IVM_TRACEFS_DIR "/events/kvm/kvm_exit/format") ?
	    "kvm_exit and kvm_vcpu_wakeup events: HLT exits and halt ends of KVM guests" :
	    "no kvm events in tracefs (not mounted, or no tracepoints): KVM guests' halts are seen by the scheduler only");
	/*
	 * libvirt runs QEMU as its own user (libvirt-qemu, group kvm): a node
	 * only root can open (no udev rule ran) leaves its guests on TCG.
	 */
	if (stat("/dev/kvm", &st) == 0 && !(st.st_mode & 0066))
		say(d, WARN, "chgrp kvm /dev/kvm && chmod 0660 /dev/kvm (what udev's rule does)",
		    "kvm: /dev/kvm is mode %03o, owner only: libvirt's QEMU (user libvirt-qemu) cannot open it, and its guests run under TCG",
		    (unsigned int)(st.st_mode & 0777));
	if (poll > 0)
		say(d, PASS, NULL,
		    "kvm halt polling: halt_poll_ns %ld: halts shorter than %ld us never reach the host scheduler; profile takes them from kvm_exit and kvm_vcpu_wakeup",
		    poll, poll / 1000);
}

static void check_libvirt(struct doctor *d, const char *uri)
{
	struct ivm_error *err;
	char **names = NULL;
	size_t nr = 0;

	err = ivm_libvirt_running_domains(uri, &names, &nr);
	if (err) {
		say(d, WARN, "libvirtd -d (or systemctl start libvirtd); plain QEMU guests work without it (--qmp PATH)",
		    "libvirt: %s does not answer: %s", uri ? uri : "qemu:///system",
		    ivm_error_string(err));
		ivm_error_destroy(err);
		return;
	}
	say(d, PASS, NULL, "libvirt: %s answers, %zu running domain%s",
	    uri ? uri : "qemu:///system", nr, nr == 1 ? "" : "s");
	ivm_libvirt_free_names(names, nr);
}

/* ---- the guest ------------------------------------------------------------ */

static void check_helper(struct doctor *d, struct ivm_guest *g,
			 const char *socket, const char *qmp_path)
{
	struct ivm_helper_hello hello;
	struct ivm_helper *helper = NULL;
	struct ivm_error *err;
	char *path = NULL;

	err = ivm_pin_helper_socket(g, socket, qmp_path, &path);
	if (!err)
		err = ivm_helper_connect_path(path, &helper);
	if (!err)
		err = ivm_helper_hello(helper, &hello);
	if (err && err->code == IVM_ERROR_OS && err->errnum == EACCES &&
	    !ivm_caps_effective(IVM_CAP_DAC_OVERRIDE)) {
		say(d, WARN, "run idlevm as root, or give it CAP_DAC_OVERRIDE",
		    "helper: its channel cannot be opened without CAP_DAC_OVERRIDE (%s): no pin capture, no CFI readahead; profile captures optimistic",
		    ivm_error_string(err));
	} else if (err) {
		say(d, WARN,
		    "install idlevm-helper in the guest (dpkg -i idlevm-helper_" IVM_VERSION "_amd64.deb) and give the domain the channel of images/helper-channel.xml",
		    "helper: none answers (%s): no pin capture, no CFI readahead; profile captures optimistic",
		    ivm_error_string(err));
	} else {
		char version[IVM_TEXT_SAFE_SIZE(sizeof(hello.helper_version))];

		ivm_text_safe(version, sizeof(version), hello.helper_version);
		if (strcmp(hello.helper_version, IVM_VERSION))
			say(d, WARN, "install the helper of this idlevm in the guest",
			    "helper: idlevm-helper %s, protocol %u, at %s: another version than idlevm " IVM_VERSION,
			    version, hello.protocol, path);
		else
			say(d, PASS, NULL, "helper: idlevm-helper %s, protocol %u, at %s",
			    version, hello.protocol, path);
	}
	ivm_error_destroy(err);
	ivm_helper_destroy(helper);
	free(path);
}

static void check_kernel(struct doctor *d, struct ivm_guest *g,
			 const struct ivm_guest_options *opts)
{
	struct ivm_vmcoreinfo *vi = NULL;
	struct ivm_error *err;
	char fix[256];

	err = ivm_guest_open_kernel(g, opts);
	if (err) {
		const char *e = ivm_error_string(err);

		if (strstr(e, "banner") || strstr(e, "has not booted") ||
		    strstr(e, "page-table root"))
			snprintf(fix, sizeof(fix), "wait for the guest to boot, then run doctor again");
		else if (strstr(e, "no VMCOREINFO page"))
			snprintf(fix, sizeof(fix),
				 "install the guest kernel's debuginfo (Debian: apt-get install linux-image-RELEASE-dbg) or pass --vmlinux FILE; or give the guest VMCOREINFO (libvirt: <features><vmcoreinfo state='on'/></features>; QEMU: -device vmcoreinfo) with qemu_fw_cfg loaded in it");
		else
			snprintf(fix, sizeof(fix),
				 "install the guest kernel's debuginfo (Debian: apt-get install linux-image-RELEASE-dbg) or pass --vmlinux FILE");
		say(d, FAIL, fix, "kernel: not found: %s", e);
		ivm_error_destroy(err);
		return;
	}
	if (g->vmlinux)
		say(d, PASS, NULL, "kernel: %s, symbols and layout from %s", g->release,
		    g->vmlinux);
	else {
		snprintf(fix, sizeof(fix),
			 "for file:line and inline frames: apt-get install linux-image-%s-dbg (or --vmlinux FILE)",
			 g->release);
		say(d, WARN, fix,
		    "kernel: %s, no vmlinux on this host: symbols from the guest's kallsyms, BTF and ORC in its memory (function names, no file:line)",
		    g->release);
	}
	err = ivm_guest_vmcoreinfo(g, &vi);
	if (!err)
		say(d, PASS, NULL, "vmcoreinfo: in guest memory (kernel found without a vmlinux too)");
	else
		say(d, g->vmlinux ? PASS : WARN,
		    "libvirt: <features><vmcoreinfo state='on'/></features>; plain QEMU: -device vmcoreinfo; in the guest: modprobe qemu_fw_cfg",
		    "vmcoreinfo: %s%s", ivm_error_string(err),
		    g->vmlinux ? " (not needed: the vmlinux is there)" : "");
	ivm_error_destroy(err);
	ivm_vmcoreinfo_destroy(vi);
}

static void check_guest(struct doctor *d, struct ivm_guest_options *opts,
			const char *helper_socket)
{
	struct ivm_tcg_env *env = NULL;
	struct ivm_error *err;
	struct ivm_guest *g;
	char fix[256], state[32];
	int major, minor, micro;

	opts->machine_only = true;
	err = ivm_guest_open(opts, &g);
	if (err) {
		const char *e = ivm_error_string(err);

		if (opts->domain && err->code == IVM_ERROR_INVALID)
			snprintf(fix, sizeof(fix), "virsh start %s", opts->domain);
		else if (opts->domain && err->code == IVM_ERROR_NOT_FOUND)
			snprintf(fix, sizeof(fix), "virsh list --all (the domain's name), or --connect URI");
		else if (err->code == IVM_ERROR_OS &&
			 (err->errnum == EPERM || err->errnum == EACCES))
			snprintf(fix, sizeof(fix), "run idlevm as root, or give it CAP_SYS_PTRACE");
		else if (opts->domain)
			snprintf(fix, sizeof(fix), "start libvirt: libvirtd -d (or systemctl start libvirtd), or check --connect");
		else
			snprintf(fix, sizeof(fix), "start QEMU with -qmp unix:%s,server=on,wait=off",
				 opts->qmp_path);
		say(d, FAIL, fix, "guest: cannot open it: %s", e);
		ivm_error_destroy(err);
		return;
	}
	if (!g->qmp) {
		/* A core: what info, ps and stack will read from it. */
		say(d, PASS, NULL, "guest: the core %s, %zu vCPUs", g->name,
		    g->nr_vcpus);
		check_kernel(d, g, opts);
		ivm_guest_close(g);
		return;
	}
	ivm_qmp_qemu_version(g->qmp, &major, &minor, &micro);
	err = ivm_qmp_run_state(g->qmp, state, sizeof(state));
	if (!err && !strcmp(state, "internal-error"))
		say(d, FAIL, "dmesg | grep -i kvm (the host's reason); a guest kernel this KVM can run",
		    "guest: %s, qemu pid %d: stopped by QEMU after an internal error of KVM, nothing runs",
		    g->name, (int)g->qemu_pid);
	else
		say(d, PASS, NULL, "guest: %s, QEMU %d.%d.%d, pid %d, %zu vCPUs (threads found), %s",
		    g->name, major, minor, micro, (int)g->qemu_pid,
		    g->nr_vcpus, err ? "?" : state);
	ivm_error_destroy(err);
	if (g->kvm) {
		say(d, PASS, NULL,
		    "accelerator: KVM: registers of running vCPUs through the monitor (QEMU's copy is current only after it synchronises it)");
	} else {
		err = ivm_tcg_env_locate(g->qemu_pid, g->qmp, &env);
		if (err)
			say(d, WARN, "profile --registers monitor (slower for the guest: every read takes QEMU's lock)",
			    "accelerator: TCG, QEMU's register state not found in its memory (%s): registers through the monitor",
			    ivm_error_string(err));
		else
			say(d, PASS, NULL,
			    "accelerator: TCG, registers read from QEMU's memory (state found, guest paused %.1f ms)",
			    (double)ivm_tcg_env_pause_ns(env) / 1e6);
		ivm_error_destroy(err);
		ivm_tcg_env_destroy(env);
	}
	if (!strcmp(g->gmem_kind, "process_vm_readv"))
		say(d, PASS, NULL,
		    "guest memory: read with process_vm_readv (shared memory backing would let idlevm map it: <memoryBacking><source type='memfd'/><access mode='shared'/></memoryBacking>)");
	else
		say(d, PASS, NULL, "guest memory: %s", g->gmem_kind);
	check_kernel(d, g, opts);
	check_helper(d, g, helper_socket, opts->qmp_path);
	ivm_guest_close(g);
}

int ivm_cmd_doctor(int argc, char **argv)
{
	enum { OPT_HELPER_SOCKET = 256 };
	static const struct option longopts[] = {
		IVM_GUEST_LONGOPTS,
		{ "helper-socket", required_argument, NULL, OPT_HELPER_SOCKET },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_guest_options opts = { 0 };
	const char *helper_socket = NULL;
	struct doctor d = { PASS, { 0 } };
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, IVM_GUEST_SHORTOPTS "h", longopts,
				NULL)) != -1) {
		if (ivm_guest_parse_option(&opts, c, optarg))
			continue;
		if (c == OPT_HELPER_SOCKET) {
			helper_socket = optarg;
			continue;
		}
		if (c == 'h') {
			doctor_usage(stdout);
			return 0;
		}
		doctor_usage(stderr);
		return 2;
	}
	if (optind != argc || !!opts.domain + !!opts.qmp_path +
	    !!opts.core_path > 1 || (opts.connect_uri && !opts.domain)) {
		fprintf(stderr, "idlevm doctor: at most one of --domain, --qmp and --core, and --connect goes with --domain\n");
		return 2;
	}
	printf("idlevm %s\n", IVM_VERSION);
	check_privileges(&d);
	check_tracefs(&d);
	check_idle_gate(&d);
	check_kvm(&d);
	if (!opts.qmp_path)
		check_libvirt(&d, opts.connect_uri);
	if (opts.domain || opts.qmp_path || opts.core_path)
		check_guest(&d, &opts, helper_socket);
	printf("\nchecks: %u pass, %u warn, %u fail: %s\n", d.counts[PASS],
	       d.counts[WARN], d.counts[FAIL],
	       d.worst == FAIL ? "idlevm profile will not work" :
	       d.worst == WARN ? "idlevm profile will work, with less (see the warnings)" :
	       opts.core_path ? "idlevm info, ps and stack will read this core" :
	       opts.domain || opts.qmp_path ? "idlevm profile will work" :
	       "this host is ready (name a guest with --domain or --qmp to check it too)");
	return d.worst == FAIL ? 1 : 0;
}
