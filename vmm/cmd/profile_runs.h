/* SPDX-License-Identifier: MIT */
/*
 * One guest's run of `idlevm profile`, as the command's loop drives it
 * (cmd_profile.c): opening the guest and its profiler (profile_runs.c),
 * each step, its end and, in a continuous run, following the guest to its
 * next boot; and the closing lines that say what the run did and cost
 * (profile_summary.c).  One thread steps every run; nothing here is
 * thread-safe.
 */
#ifndef IVM_PROFILE_RUNS_H
#define IVM_PROFILE_RUNS_H

#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "access/tcg_env.h"
#include "cmd/boot_watch.h"
#include "cmd/window_run.h"
#include "kernel/guest.h"
#include "profile/capture_pin.h"
#include "profile/profiler.h"

/* Guests one run profiles at most. */
#define MAX_GUESTS 64

/* Where running vCPUs' registers come from (--registers). */
enum regs_source { REGS_AUTO, REGS_MEMORY, REGS_MONITOR };

/* What every guest's run shares: the command line. */
struct profile_opts {
	struct ivm_profiler_config cfg;	/* each run copies it */
	struct ivm_guest_options gopts;	/* --connect, --qmp, --vmlinux */
	bool auto_source;
	enum regs_source regs;
	const char *helper_socket;
	unsigned int pin_lease_us;
	enum ivm_pin_policy pin_policy;
	bool no_readahead;	/* --no-readahead */
	struct ivm_window_dir_config wcfg;	/* dir: a file per guest */
	bool window_pprof;
	const char *output;		/* no dir: the one guest's file */
	uint64_t end_ns;		/* -D: the run's end; 0 none */
	bool several;			/* say which guest each line is of */
};

/* One guest's run. */
struct guest_run {
	char *name;			/* the domain (or QMP socket) */
	struct ivm_guest *g;
	struct ivm_tcg_env *tcg_env;
	struct ivm_pin_capture *pin;
	struct ivm_profiler_config cfg;
	struct ivm_window_run windows;
	struct ivm_profiler_result res;
	struct ivm_profiler *pr;
	bool running;
	bool busy;			/* in its step (maybe waiting for its helper) */
	bool ended;			/* its step said the run is over */
	struct ivm_error *end_err;	/* and why, if an error */
	uint64_t attach_ns;		/* CPU time opening the guest took */
	/* Heap the guest's opening (its kernel's tables) and its run's
	 * start took, in bytes (base/heap.h). */
	size_t heap_open, heap_start;
	size_t heap_end;		/* idlevm's whole heap as the run ended */
	/* Most guests seen sharing its kernel's tables, at its open or end. */
	unsigned int ktables_users;
	/* The loop's last wait: whether it was in it, and its descriptors. */
	bool waited;
	size_t fd_first, nr_fds;
	struct ivm_boot_watch boot;	/* whether the boot profiled goes on */
	/*
	 * Between two boots of the guest (a continuous run follows it): no
	 * profiler, the guest opened again at retry_at until its kernel is
	 * usable.  g stays open (a panicked kernel) until a reset says a new
	 * boot is under way.
	 */
	bool waiting;
	uint64_t waiting_since, retry_at, retry_ns;
	uint64_t partial_since;		/* opened, some vCPU without a CPU yet */
	uint64_t gone_at;		/* its run found QEMU gone, or 0 */
	char last_try[256];		/* what the last try said */
	/* Its libvirt connection: lost since (ms, as said), times back. */
	int64_t monitor_lost_ms;
	uint64_t monitor_reconnects;
	char after[256];		/* the next window's "after" metadata */
};

/* Ctrl-C, SIGTERM or SIGHUP: every run ends at its next step. */
extern volatile sig_atomic_t profile_stop_requested;
/* The runs of this process, for serve_others() (profile_runs.c). */
extern struct guest_run *profile_all_runs;
extern size_t *profile_nr_all_runs;

/* profile_runs.c */
struct ivm_error *guest_run_start(struct guest_run *r,
				   const struct profile_opts *o,
				   const char *domain);
void guest_run_release(struct guest_run *r);
void guest_run_step(struct guest_run *r);
bool guest_run_steppable(const struct guest_run *r);
bool guest_run_step_due(const struct guest_run *r, const struct pollfd *fds,
			size_t first, size_t n, uint64_t now);
struct ivm_error *guest_run_end(struct guest_run *r,
				 const struct profile_opts *o,
				 struct ivm_error *err);
bool guest_run_follows(const struct guest_run *r, const struct profile_opts *o,
		       bool all_domains);
bool guest_run_settled(struct guest_run *r, uint64_t now);
struct ivm_error *guest_run_between(struct guest_run *r,
				     const struct profile_opts *o);
void guest_run_monitor_news(struct guest_run *r, const struct profile_opts *o);
void guest_run_stop_waiting(struct guest_run *r, const struct profile_opts *o);
void guest_run_resume(struct guest_run *r, const struct profile_opts *o,
		      bool rt);
/* Whether one of runs profiles (or follows) domain name. */
bool guest_runs_profile(const struct guest_run *runs, size_t nr,
			const char *name);

/* profile_summary.c: "idlevm: NAME: " before a line when several run. */
void guest_run_who(const struct profile_opts *o, const struct guest_run *r);
/* The closing lines of r's run (or of its boot, in a continuous run). */
void guest_run_summary(const struct profile_opts *o,
			const struct guest_run *r);

#endif /* IVM_PROFILE_RUNS_H */
