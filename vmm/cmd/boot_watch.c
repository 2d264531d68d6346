// SPDX-License-Identifier: MIT
#include <stdint.h>
#include <string.h>

#include "cmd/boot_watch.h"
#include "kernel/kernel_layout.h"
#include "kernel/ksyms.h"
#include "profile/profiler.h"

/*
 * How often a plain socket's events are read, and the kernel looked at:
 * more often while libvirtd is away (no event can come then, and a reboot
 * is seen from the kernel only).
 */
#define DRAIN_NS 100000000ull
#define LOOK_NS 1000000000ull
#define LOOK_DEAF_NS 100000000ull

/*
 * end: one bit, or SAVED or MIGRATED with GONE.  The reason is the first
 * seen, except that SAVED or MIGRATED name a QEMU gone that was seen
 * first without a why (its lifecycle state, set with the same event).
 */
static void saw(struct ivm_boot_watch *w, unsigned int end)
{
	unsigned int none = 0, gone = IVM_BOOT_GONE, reason = end;

	atomic_fetch_or(&w->seen, end);
	if (end & (IVM_BOOT_SAVED | IVM_BOOT_MIGRATED)) {
		reason &= ~IVM_BOOT_GONE;
		if (atomic_compare_exchange_strong(&w->first, &gone, reason))
			return;
	}
	atomic_compare_exchange_strong(&w->first, &none, reason);
}

void ivm_boot_watch_reset(struct ivm_boot_watch *w)
{
	atomic_store(&w->seen, 0);
	atomic_store(&w->first, 0);
	atomic_store(&w->stop_told, false);
}

bool ivm_boot_watch_stop_told(const struct ivm_boot_watch *w)
{
	return atomic_load(&w->stop_told);
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
	else if (!strncmp(name, "DOMAIN_", 7))
		atomic_store(&w->stop_told, true);
	if (!strcmp(name, "DOMAIN_STOPPED"))
		saw(w, IVM_BOOT_GONE);
	else if (!strcmp(name, "DOMAIN_SAVED"))
		saw(w, IVM_BOOT_SAVED | IVM_BOOT_GONE);
	else if (!strcmp(name, "DOMAIN_MIGRATED"))
		saw(w, IVM_BOOT_MIGRATED | IVM_BOOT_GONE);
}

static void on_event(void *arg, const struct ivm_qmp_event *event)
{
	ivm_boot_watch_event(arg, event->name);
}

void ivm_boot_watch_attach(struct ivm_boot_watch *w, struct ivm_guest *guest)
{
	uint64_t link, slide;
	struct ivm_error *err;

	ivm_boot_watch_reset(w);
	w->guest = guest;
	w->panic_cpu = w->banner = w->jiffies = 0;
	w->last_jiffies = 0;
	w->strikes = 0;
	w->still_since_ns = 0;
	w->next_drain_ns = w->next_look_ns = 0;
	if (guest->qmp)
		ivm_qmp_set_event_callback(guest->qmp, on_event, w);
	/*
	 * panic_cpu: atomic_t, PANIC_CPU_INVALID (-1) until a CPU enters
	 * panic() (5.10 to 6.12 alike).  A kernel without it is watched by
	 * its events only.
	 */
	if (!guest->has_kernel || !guest->ksyms)
		return;
	slide = ivm_kernel_layout_slide(guest->layout);
	err = ivm_ksyms_lookup(guest->ksyms, "panic_cpu", &link);
	if (!err)
		w->panic_cpu = link + slide;
	ivm_error_destroy(err);
	/* The boot as opened: its banner's first bytes, its jiffies. */
	err = ivm_ksyms_lookup(guest->ksyms, "linux_banner", &link);
	if (!err)
		err = ivm_kernel_read(guest->layout, link + slide,
				      w->banner_text, sizeof(w->banner_text));
	if (!err)
		w->banner = link + slide;
	ivm_error_destroy(err);
	err = ivm_ksyms_lookup(guest->ksyms, "jiffies_64", &link);
	if (!err)
		err = ivm_kernel_read(guest->layout, link + slide,
				      &w->last_jiffies, sizeof(w->last_jiffies));
	if (!err)
		w->jiffies = link + slide;
	ivm_error_destroy(err);
}

void ivm_boot_watch_look(struct ivm_boot_watch *w, const struct ivm_error *err,
			 bool banner_same, uint64_t jiffies)
{
	if (err && err->code == IVM_ERROR_GONE) {
		saw(w, IVM_BOOT_GONE);
		return;
	}
	banner_same = banner_same && !err;
	/*
	 * Two in a row: one torn or early read is no reboot.  Jiffies only
	 * go back with a new boot (INITIAL_JIFFIES again).
	 */
	if (banner_same && jiffies >= w->last_jiffies) {
		w->last_jiffies = jiffies;
		w->strikes = 0;
		return;
	}
	if (++w->strikes >= IVM_BOOT_CHANGED_LOOKS)
		saw(w, IVM_BOOT_CHANGED);
}

void ivm_boot_watch_still(struct ivm_boot_watch *w, bool moved, uint64_t now)
{
	if (moved) {
		w->still_since_ns = 0;
		return;
	}
	if (!w->still_since_ns)
		w->still_since_ns = now ? now : 1;
	else if (now - w->still_since_ns >= IVM_BOOT_STILL_NS)
		saw(w, IVM_BOOT_CHANGED);
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
	if (now < w->next_look_ns || ivm_boot_watch_seen(w))
		return;
	w->next_look_ns = now + (ivm_qmp_libvirt_lost_ms(g->qmp) ?
				 LOOK_DEAF_NS : LOOK_NS);
	if (w->panic_cpu) {
		/* A read that fails is no panic: the events still say. */
		err = ivm_kernel_read(g->layout, w->panic_cpu, &cpu,
				      sizeof(cpu));
		if (!err && cpu != -1)
			saw(w, IVM_BOOT_PANIC);
		ivm_error_destroy(err);
	}
	if (w->banner && w->jiffies) {
		char text[sizeof(w->banner_text)];
		uint64_t jiffies = 0, before = w->last_jiffies;

		err = ivm_kernel_read(g->layout, w->banner, text, sizeof(text));
		if (!err)
			err = ivm_kernel_read(g->layout, w->jiffies, &jiffies,
					      sizeof(jiffies));
		ivm_boot_watch_look(w, err, !err && !memcmp(text, w->banner_text,
							    sizeof(text)), jiffies);
		if (!ivm_qmp_libvirt_lost_ms(g->qmp) ||
		    ivm_qmp_lifecycle_cached(g->qmp) != IVM_QMP_RUNNING)
			w->still_since_ns = 0;
		else
			ivm_boot_watch_still(w, err || jiffies != before, now);
		ivm_error_destroy(err);
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
		return IVM_END_GONE;
	case IVM_BOOT_CHANGED:
		return "the guest's kernel is not the boot opened (a reboot unannounced)";
	case IVM_BOOT_SAVED:
		return "the guest was saved to a file (its QEMU exited; the boot goes on where it is restored)";
	case IVM_BOOT_MIGRATED:
		return "the guest migrated away (its QEMU exited; the boot goes on on the other host)";
	default:
		return "the guest's boot ended";
	}
}

bool ivm_boot_watch_new_boot(const struct ivm_boot_watch *w)
{
	unsigned int seen = ivm_boot_watch_seen(w);

	return (seen & (IVM_BOOT_RESET | IVM_BOOT_CHANGED)) &&
	       !(seen & (IVM_BOOT_GONE | IVM_BOOT_SHUTDOWN));
}
