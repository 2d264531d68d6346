// SPDX-License-Identifier: MIT
#include <stdint.h>
#include <string.h>

#include "cmd/boot_watch.h"
#include "kernel/kernel_layout.h"
#include "kernel/ksyms.h"

/* How often a plain socket's events are read, and panic_cpu. */
#define DRAIN_NS 100000000ull
#define PANIC_NS 1000000000ull

static void saw(struct ivm_boot_watch *w, unsigned int end)
{
	unsigned int none = 0;

	atomic_fetch_or(&w->seen, end);
	atomic_compare_exchange_strong(&w->first, &none, end);
}

void ivm_boot_watch_reset(struct ivm_boot_watch *w)
{
	atomic_store(&w->seen, 0);
	atomic_store(&w->first, 0);
}

void ivm_boot_watch_event(struct ivm_boot_watch *w, const char *name)
{
	/*
	 * QEMU's SHUTDOWN also comes before it exits on a reboot it was
	 * told not to do (-no-reboot, libvirt's on_reboot destroy): the
	 * machine goes away then, and DOMAIN_STOPPED or the monitor's close
	 * follows.
	 */
	if (!strcmp(name, "RESET"))
		saw(w, IVM_BOOT_RESET);
	else if (!strcmp(name, "GUEST_PANICKED"))
		saw(w, IVM_BOOT_PANIC);
	else if (!strcmp(name, "SHUTDOWN"))
		saw(w, IVM_BOOT_SHUTDOWN);
	else if (!strcmp(name, "DOMAIN_STOPPED"))
		saw(w, IVM_BOOT_GONE);
}

static void on_event(void *arg, const struct ivm_qmp_event *event)
{
	ivm_boot_watch_event(arg, event->name);
}

void ivm_boot_watch_attach(struct ivm_boot_watch *w, struct ivm_guest *guest)
{
	uint64_t link;
	struct ivm_error *err;

	ivm_boot_watch_reset(w);
	w->guest = guest;
	w->panic_cpu = 0;
	w->next_drain_ns = w->next_panic_ns = 0;
	if (guest->qmp)
		ivm_qmp_set_event_callback(guest->qmp, on_event, w);
	/*
	 * panic_cpu: atomic_t, PANIC_CPU_INVALID (-1) until a CPU enters
	 * panic() (5.10 to 6.12 alike).  A kernel without it is watched by
	 * its events only.
	 */
	if (!guest->has_kernel || !guest->ksyms)
		return;
	err = ivm_ksyms_lookup(guest->ksyms, "panic_cpu", &link);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	w->panic_cpu = link + ivm_kernel_layout_slide(guest->layout);
}

void ivm_boot_watch_detach(struct ivm_boot_watch *w)
{
	/* Under the queue's lock: no callback runs with w after this. */
	if (w->guest && w->guest->qmp)
		ivm_qmp_set_event_callback(w->guest->qmp, NULL, NULL);
	w->guest = NULL;
	w->panic_cpu = 0;
}

void ivm_boot_watch_poll(struct ivm_boot_watch *w, uint64_t now)
{
	struct ivm_guest *g = w->guest;
	struct ivm_error *err;
	int32_t cpu;

	if (!g || !g->qmp)
		return;
	if (now >= w->next_drain_ns) {
		/* Reads a socket's events, which calls on_event. */
		if (ivm_qmp_lifecycle(g->qmp) == IVM_QMP_GONE)
			saw(w, IVM_BOOT_GONE);
		w->next_drain_ns = now + DRAIN_NS;
	}
	if (w->panic_cpu && now >= w->next_panic_ns &&
	    !(ivm_boot_watch_seen(w) & (IVM_BOOT_PANIC | IVM_BOOT_RESET))) {
		/* A read that fails is no panic: the events still say. */
		err = ivm_kernel_read(g->layout, w->panic_cpu, &cpu,
				      sizeof(cpu));
		if (!err && cpu != -1)
			saw(w, IVM_BOOT_PANIC);
		ivm_error_destroy(err);
		w->next_panic_ns = now + PANIC_NS;
	}
}

unsigned int ivm_boot_watch_seen(const struct ivm_boot_watch *w)
{
	return atomic_load(&w->seen);
}

unsigned int ivm_boot_watch_first(const struct ivm_boot_watch *w)
{
	return atomic_load(&w->first);
}

const char *ivm_boot_end_reason(unsigned int end)
{
	switch (end) {
	case IVM_BOOT_RESET:
		return "the guest rebooted";
	case IVM_BOOT_PANIC:
		return "the guest's kernel panicked";
	case IVM_BOOT_SHUTDOWN:
		return "the guest shut down";
	case IVM_BOOT_GONE:
		return "the guest went away";
	default:
		return "the guest's boot ended";
	}
}

bool ivm_boot_watch_new_boot(const struct ivm_boot_watch *w)
{
	unsigned int seen = ivm_boot_watch_seen(w);

	return (seen & IVM_BOOT_RESET) &&
	       !(seen & (IVM_BOOT_GONE | IVM_BOOT_SHUTDOWN));
}
