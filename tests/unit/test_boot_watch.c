// SPDX-License-Identifier: MIT
/*
 * boot_watch: which monitor events end a guest's boot, and why, on
 * events recorded from QEMU 7.2 (reset-quit.json: `system_reset`, the
 * guest's own resets, `quit`, the monitor closing) and on the sequences
 * libvirt's domain events give (named alike by qmp.c).
 */
#include <criterion/criterion.h>
#include <string.h>
#include <unistd.h>

#include <libvirt/libvirt.h>

#include "access/qmp.h"
#include "base/clock.h"
#include "cmd/boot_watch.h"
#include "kernel/guest.h"
#include "test_qmp_fake.h"

/* As test_qmp.c: long enough for a loaded machine to schedule the fake. */
#define FAKE_GREETS_WITHIN_MS 30000

static void feed(struct ivm_boot_watch *w, const char *const *names)
{
	for (; *names; names++)
		ivm_boot_watch_event(w, *names);
}

Test(boot_watch, pause_and_resume_end_no_boot)
{
	static const char *const ev[] = { "STOP", "RESUME", "STOP", "RESUME",
					  "SUSPEND", "WAKEUP", NULL };
	struct ivm_boot_watch w = { 0 };

	feed(&w, ev);
	cr_expect_eq(ivm_boot_watch_seen(&w), 0);
	cr_expect_eq(ivm_boot_watch_first(&w), 0);
	cr_expect_not(ivm_boot_watch_new_boot(&w));
}

/* libvirt, on_reboot restart: its reboot event, named RESET. */
Test(boot_watch, reboot_is_a_new_boot_on_the_same_machine)
{
	static const char *const ev[] = { "RESET", "RESUME", NULL };
	struct ivm_boot_watch w = { 0 };

	feed(&w, ev);
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_RESET);
	cr_expect(ivm_boot_watch_new_boot(&w));
	cr_expect_str_eq(ivm_boot_end_reason(ivm_boot_watch_first(&w)),
			 "the guest rebooted");
	ivm_boot_watch_reset(&w);
	cr_expect_eq(ivm_boot_watch_seen(&w), 0);
}

/*
 * A panic (libvirt's CRASHED event, or QEMU's GUEST_PANICKED with a
 * pvpanic device) is the reason; the machine is no new boot until the
 * reset of a kernel that reboots after a panic.
 */
Test(boot_watch, panic_then_reset)
{
	struct ivm_boot_watch w = { 0 };

	ivm_boot_watch_event(&w, "GUEST_PANICKED");
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_PANIC);
	cr_expect_not(ivm_boot_watch_new_boot(&w));
	ivm_boot_watch_event(&w, "RESET");
	cr_expect(ivm_boot_watch_new_boot(&w));
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_PANIC);
	cr_expect_str_eq(ivm_boot_end_reason(ivm_boot_watch_first(&w)),
			 "the guest's kernel panicked");
}

/*
 * virsh destroy, QEMU killed by SIGKILL: libvirt's STOPPED event
 * (DOMAIN_STOPPED), maybe after a SHUTDOWN; no new boot on this QEMU.
 */
Test(boot_watch, destroy_and_kill_are_the_end_of_the_machine)
{
	static const char *const destroyed[] = { "DOMAIN_STOPPED", NULL };
	static const char *const off[] = { "SHUTDOWN", "DOMAIN_STOPPED", NULL };
	static const char *const reboot_off[] = { "RESET", "DOMAIN_STOPPED",
						  NULL };
	struct ivm_boot_watch w = { 0 };

	feed(&w, destroyed);
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_GONE);
	cr_expect_not(ivm_boot_watch_new_boot(&w));
	ivm_boot_watch_reset(&w);
	feed(&w, off);
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_SHUTDOWN);
	cr_expect_not(ivm_boot_watch_new_boot(&w));
	ivm_boot_watch_reset(&w);
	/* A reset whose QEMU then went: the domain must be found again. */
	feed(&w, reboot_off);
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_RESET);
	cr_expect_not(ivm_boot_watch_new_boot(&w));
}

/* QEMU's own events on its socket, as recorded, through the monitor. */
Test(boot_watch, recorded_reset_quit_and_close)
{
	struct ivm_guest guest = { 0 };
	struct ivm_boot_watch w = { 0 };
	struct fake_qemu fake;
	struct ivm_error *err;
	int fd, i;

	fake_init(&fake, "reset-quit.json", &fd);
	fake_start(&fake);
	err = ivm_qmp_connect_fd(fd, "fake", FAKE_GREETS_WITHIN_MS, &guest.qmp);
	cr_assert_null(err, "connect: %s", ivm_error_string(err));
	/* No kernel: events only. */
	ivm_boot_watch_attach(&w, &guest);
	ivm_boot_watch_poll(&w, ivm_mono_ns());
	cr_expect_eq(ivm_boot_watch_seen(&w), 0);

	err = ivm_qmp_execute(guest.qmp, "system_reset", NULL, NULL);
	cr_assert_null(err, "%s", ivm_error_string(err));
	/* The reply comes after the first RESET: seen by now. */
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_RESET);
	cr_expect(ivm_boot_watch_new_boot(&w));

	err = ivm_qmp_execute(guest.qmp, "quit", NULL, NULL);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_expect(ivm_boot_watch_seen(&w) & IVM_BOOT_SHUTDOWN);
	cr_expect_not(ivm_boot_watch_new_boot(&w));
	/* The monitor closes after quit: as long as a loaded machine needs. */
	for (i = 0; i < 3000 && !(ivm_boot_watch_seen(&w) & IVM_BOOT_GONE); i++) {
		usleep(10000);
		ivm_boot_watch_poll(&w, ivm_mono_ns() + 1000000000ull * (uint64_t)(i + 1));
	}
	cr_expect(ivm_boot_watch_seen(&w) & IVM_BOOT_GONE);
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_RESET);

	ivm_boot_watch_detach(&w);
	ivm_qmp_destroy(guest.qmp);
	fake_join(&fake);
	cr_expect_eq(fake.unexpected, 0);
}

/*
 * The kernel looked at once a second (banner still in place, jiffies_64):
 * a reboot whose event was lost.  Jiffies as a 6.1 guest at HZ 250 gives
 * them (INITIAL_JIFFIES 0xfffb6c20, then 250 a second).
 */
Test(boot_watch, kernel_looks_find_a_reboot_nobody_announced)
{
	struct ivm_boot_watch w = { .last_jiffies = 0xfffb6c20ull + 250 * 600 };
	uint64_t j = w.last_jiffies;

	/* The same boot: jiffies go on, the banner stays. */
	ivm_boot_watch_look(&w, NULL, true, j += 250);
	ivm_boot_watch_look(&w, NULL, true, j += 250);
	cr_expect_eq(ivm_boot_watch_seen(&w), 0);
	/* One odd look (a torn read, a read that failed) is no reboot. */
	ivm_boot_watch_look(&w, NULL, false, 0);
	ivm_boot_watch_look(&w, NULL, true, j += 250);
	ivm_boot_watch_look(&w, NULL, true, 3);
	ivm_boot_watch_look(&w, NULL, true, j += 250);
	cr_expect_eq(ivm_boot_watch_seen(&w), 0);
	/* Same offset, new boot: jiffies start again. */
	ivm_boot_watch_look(&w, NULL, true, 0xfffb6c20ull + 250 * 4);
	ivm_boot_watch_look(&w, NULL, true, 0xfffb6c20ull + 250 * 5);
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_CHANGED);
	cr_expect(ivm_boot_watch_new_boot(&w));

	/* Another offset: the banner is gone from where it was. */
	ivm_boot_watch_reset(&w);
	w.strikes = 0;
	ivm_boot_watch_look(&w, NULL, false, j += 250);
	ivm_boot_watch_look(&w, NULL, false, j += 250);
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_CHANGED);
}

/*
 * While libvirtd is away, looks every 100 ms: a reboot onto another
 * offset left the old boot's memory as it was (seen by t_97: its banner
 * in place, its jiffies frozen).  Jiffies still for IVM_BOOT_STILL_NS end
 * the boot; any move starts the count again.
 */
Test(boot_watch, jiffies_that_stop_while_deaf_are_a_reboot)
{
	struct ivm_boot_watch w = { 0 };
	uint64_t t = 5000000000ull, step = 100000000ull;

	/* An idle guest's tick may pause for a while: not for long. */
	ivm_boot_watch_still(&w, false, t);
	ivm_boot_watch_still(&w, false, t += IVM_BOOT_STILL_NS - step);
	ivm_boot_watch_still(&w, true, t += step);
	ivm_boot_watch_still(&w, false, t += step);
	ivm_boot_watch_still(&w, false, t += IVM_BOOT_STILL_NS - step);
	cr_expect_eq(ivm_boot_watch_seen(&w), 0);
	ivm_boot_watch_still(&w, false, t += step);
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_CHANGED);
	cr_expect(ivm_boot_watch_new_boot(&w));
}

/*
 * `virsh save FILE` and a migration away, as libvirt 9.0 tells them: the
 * guest paused (SUSPENDED, detail MIGRATED: no end), then its QEMU gone
 * (STOPPED, detail SAVED or MIGRATED).  The boot goes on elsewhere, in
 * another QEMU: the window ends with the precise reason, and this QEMU
 * makes no new boot.
 */
Test(boot_watch, saved_and_migrated_name_the_end)
{
	static const struct {
		int detail;
		const char *name;
		unsigned int end;
		const char *reason;
	} cases[] = {
		{ VIR_DOMAIN_EVENT_STOPPED_SAVED, "DOMAIN_SAVED", IVM_BOOT_SAVED,
		  "the guest was saved to a file" },
		{ VIR_DOMAIN_EVENT_STOPPED_MIGRATED, "DOMAIN_MIGRATED",
		  IVM_BOOT_MIGRATED, "the guest migrated away" },
		{ VIR_DOMAIN_EVENT_STOPPED_DESTROYED, "DOMAIN_STOPPED",
		  IVM_BOOT_GONE, "the guest went away" },
	};
	size_t i;

	cr_expect_str_eq(ivm_qmp_libvirt_event_name(VIR_DOMAIN_EVENT_SUSPENDED,
						    VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED),
			 "STOP");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ivm_boot_watch w = { 0 };
		const char *name;

		name = ivm_qmp_libvirt_event_name(VIR_DOMAIN_EVENT_SUSPENDED,
						  VIR_DOMAIN_EVENT_SUSPENDED_MIGRATED);
		ivm_boot_watch_event(&w, name);
		cr_expect_eq(ivm_boot_watch_seen(&w), 0, "%s: the pause", cases[i].name);
		name = ivm_qmp_libvirt_event_name(VIR_DOMAIN_EVENT_STOPPED,
						  cases[i].detail);
		cr_assert_str_eq(name, cases[i].name);
		ivm_boot_watch_event(&w, name);
		cr_expect_eq(ivm_boot_watch_first(&w), cases[i].end, "%s", name);
		cr_expect(ivm_boot_watch_seen(&w) & IVM_BOOT_GONE, "%s", name);
		cr_expect_not(ivm_boot_watch_new_boot(&w), "%s", name);
		cr_expect(!strncmp(ivm_boot_end_reason(ivm_boot_watch_first(&w)),
				   cases[i].reason, strlen(cases[i].reason)),
			  "%s: %s", name,
			  ivm_boot_end_reason(ivm_boot_watch_first(&w)));
		/* What came after is no other reason. */
		ivm_boot_watch_event(&w, "SHUTDOWN");
		cr_expect_eq(ivm_boot_watch_first(&w), cases[i].end);
	}
}

/*
 * QEMU found gone before libvirt's event says why (its lifecycle state,
 * a read of its memory): a save or a migration that follows names the
 * end; anything else seen first stays the reason.
 */
Test(boot_watch, a_save_names_a_qemu_gone_seen_first)
{
	struct ivm_boot_watch w = { 0 };

	/* As when a failed monitor call found QEMU gone: no event yet. */
	ivm_boot_watch_event(&w, "SHUTDOWN");
	cr_expect_not(ivm_boot_watch_stop_told(&w));
	ivm_boot_watch_reset(&w);
	ivm_boot_watch_event(&w, "DOMAIN_STOPPED");
	cr_assert_eq(ivm_boot_watch_first(&w), IVM_BOOT_GONE);
	cr_expect(ivm_boot_watch_stop_told(&w));
	ivm_boot_watch_event(&w, "DOMAIN_SAVED");
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_SAVED);
	ivm_boot_watch_reset(&w);
	cr_expect_not(ivm_boot_watch_stop_told(&w));
	ivm_boot_watch_event(&w, "SHUTDOWN");
	ivm_boot_watch_event(&w, "DOMAIN_MIGRATED");
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_SHUTDOWN);
	cr_expect(ivm_boot_watch_seen(&w) & IVM_BOOT_MIGRATED);
}

/*
 * `virsh save` on a loaded host (CI's t_94): the kernel looked at after
 * QEMU exited and before libvirt's STOPPED event, which came seconds
 * later.  Reads that find QEMU gone are its end, not a changed kernel, so
 * the save still names it; a read that fails otherwise still counts.
 */
Test(boot_watch, looks_at_a_qemu_gone_leave_the_why_to_libvirt)
{
	struct ivm_boot_watch w = { .last_jiffies = 1000 };
	struct ivm_error *gone = ivm_error_create(IVM_ERROR_GONE,
						  "qemu process exited (pid 1)");
	struct ivm_error *fault = ivm_error_fault(0x1000, "not readable");
	int i;

	ivm_boot_watch_event(&w, "STOP");
	for (i = 0; i < IVM_BOOT_CHANGED_LOOKS + 1; i++)
		ivm_boot_watch_look(&w, gone, false, 0);
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_GONE);
	cr_expect_not(ivm_boot_watch_stop_told(&w));
	ivm_boot_watch_event(&w, "DOMAIN_SAVED");
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_SAVED);
	cr_expect(ivm_boot_watch_stop_told(&w));

	ivm_boot_watch_reset(&w);
	for (i = 0; i < IVM_BOOT_CHANGED_LOOKS; i++)
		ivm_boot_watch_look(&w, fault, true, 2000);
	cr_expect_eq(ivm_boot_watch_first(&w), IVM_BOOT_CHANGED);
	ivm_error_destroy(gone);
	ivm_error_destroy(fault);
}
