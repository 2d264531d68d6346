// SPDX-License-Identifier: MIT
/*
 * PIN and UNPIN: move a guest thread onto one CPU for a bounded lease and
 * put its affinity back afterwards, with a journal so that a helper killed
 * while threads are pinned does not leave them pinned forever.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helper.h"

#define JOURNAL_MAGIC "idlevm-helper journal 1"
/* Far above HELPER_MAX_PINS lines of 1024-CPU masks written as ranges. */
#define JOURNAL_MAX_BYTES (1024 * 1024)

void helper_pins_init(struct helper_pins *pins, const char *journal)
{
	memset(pins, 0, sizeof(*pins));
	pins->journal = journal ? strdup(journal) : NULL;
}

void helper_pins_deinit(struct helper_pins *pins)
{
	free(pins->journal);
	pins->journal = NULL;
}

/* "0-3,8,10-11" */
static void write_cpu_list(FILE *f, const cpu_set_t *set)
{
	int cpu, end;
	bool first = true;

	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, set))
			continue;
		for (end = cpu; end + 1 < CPU_SETSIZE &&
		     CPU_ISSET(end + 1, set); end++)
			;
		fprintf(f, first ? "%d" : ",%d", cpu);
		if (end > cpu)
			fprintf(f, "-%d", end);
		first = false;
		cpu = end;
	}
}

/* Parse a cpu list; false on anything malformed or out of range. */
static bool parse_cpu_list(const char *s, cpu_set_t *set)
{
	char *end;
	unsigned long a, b;

	CPU_ZERO(set);
	for (;;) {
		if (*s < '0' || *s > '9')
			return false;
		a = strtoul(s, &end, 10);
		b = a;
		if (*end == '-') {
			s = end + 1;
			if (*s < '0' || *s > '9')
				return false;
			b = strtoul(s, &end, 10);
		}
		if (a > b || b >= CPU_SETSIZE)
			return false;
		for (; a <= b; a++)
			CPU_SET(a, set);
		if (*end == '\0')
			return CPU_COUNT(set) > 0;
		if (*end != ',')
			return false;
		s = end + 1;
	}
}

/* Rewrite the journal from the table: temporary file, then rename, so a
 * crash leaves either the old or the new journal, never half of one. */
static int journal_write(const struct helper_pins *pins)
{
	char tmp[4096];
	unsigned int i;
	FILE *f;
	int r;

	if (!pins->journal)
		return 0;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", pins->journal) >=
	    (int)sizeof(tmp))
		return -ENAMETOOLONG;
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	fprintf(f, "%s\n", JOURNAL_MAGIC);
	for (i = 0; i < pins->count; i++) {
		fprintf(f, "%d %llu ", (int)pins->pin[i].tid,
			(unsigned long long)pins->pin[i].starttime);
		write_cpu_list(f, &pins->pin[i].orig);
		fputc('\n', f);
	}
	r = ferror(f) ? -EIO : 0;
	if (fclose(f) && !r)
		r = -errno;
	if (!r && rename(tmp, pins->journal) < 0)
		r = -errno;
	if (r)
		unlink(tmp);
	return r;
}

static struct helper_pin *pin_find(struct helper_pins *pins, pid_t tid)
{
	unsigned int i;

	for (i = 0; i < pins->count; i++)
		if (pins->pin[i].tid == tid)
			return &pins->pin[i];
	return NULL;
}

static void pin_remove(struct helper_pins *pins, struct helper_pin *pin)
{
	*pin = pins->pin[--pins->count];
}

/*
 * Put the original mask back, unless the thread is gone or its tid now
 * names a younger thread: that one never was ours to touch.
 */
void helper_pin_restore(const struct helper_pin *pin)
{
	uint64_t starttime;

	if (helper_task_stat(pin->tid, &starttime, NULL) < 0 ||
	    starttime != pin->starttime)
		return;
	if (sched_setaffinity(pin->tid, sizeof(pin->orig), &pin->orig) < 0 &&
	    errno != ESRCH)
		helper_log("cannot restore affinity of tid %d: %s",
			   (int)pin->tid, strerror(errno));
}

int helper_pin(struct helper_pins *pins, pid_t tid, uint32_t cpu,
	       uint32_t lease_ms, uint64_t now_ns, uint32_t *granted,
	       uint32_t *prev_cpu)
{
	struct helper_pin *pin;
	uint64_t starttime;
	cpu_set_t one;
	bool fresh = false;
	int r;

	if (tid <= 0 || cpu >= CPU_SETSIZE)
		return -EINVAL;
	lease_ms = helper_lease_ms(lease_ms);
	r = helper_task_stat(tid, &starttime, prev_cpu);
	if (r < 0)
		return r == -ENOENT ? -ESRCH : r;
	CPU_ZERO(&one);
	CPU_SET(cpu, &one);

	pin = pin_find(pins, tid);
	if (pin && pin->by_holder && pin->starttime == starttime)
		return -EBUSY;	/* a holder's pin: that holder ends it */
	if (pin && pin->starttime != starttime) {
		/* The tid was reused since: the old pin is void. */
		pin_remove(pins, pin);
		pin = NULL;
	}
	if (!pin) {
		if (pins->count == HELPER_MAX_PINS)
			return -EBUSY;
		pin = &pins->pin[pins->count];
		memset(pin, 0, sizeof(*pin));
		pin->tid = tid;
		pin->starttime = starttime;
		if (sched_getaffinity(tid, sizeof(pin->orig), &pin->orig) < 0)
			return -errno;
		pin->pinned_ns = now_ns;
		pins->count++;
		fresh = true;
		/* Journal first: the change below must never be unrecorded. */
		r = journal_write(pins);
		if (r < 0) {
			pins->count--;
			return r;
		}
	}
	if (sched_setaffinity(tid, sizeof(one), &one) < 0) {
		r = -errno;
		if (fresh) {
			/* A first pin that failed: nothing to restore. */
			pin_remove(pins, pin);
			journal_write(pins);
		}
		return r;
	}
	pin->cpu = cpu;
	pin->deadline_ns = now_ns + (uint64_t)lease_ms * 1000000u;
	*granted = lease_ms;
	return 0;
}

/* Drop the holder pins of the CPUs in done; whether any went. */
static bool drop_held(struct helper_pins *pins, const cpu_set_t *done)
{
	unsigned int i = 0;
	bool dropped = false;

	while (i < pins->count) {
		struct helper_pin *pin = &pins->pin[i];

		if (pin->by_holder && pin->cpu < CPU_SETSIZE &&
		    CPU_ISSET(pin->cpu, done)) {
			pin_remove(pins, pin);
			dropped = true;
			continue;
		}
		i++;
	}
	return dropped;
}

int helper_pins_journal_held(struct helper_pins *pins, pid_t tid,
			     uint32_t cpu, uint64_t now_ns,
			     const cpu_set_t *done, uint64_t *starttime,
			     cpu_set_t *orig, uint32_t *prev_cpu)
{
	struct helper_pin *pin;
	bool dropped;
	int r;

	if (tid <= 0 || cpu >= CPU_SETSIZE)
		return -EINVAL;
	dropped = drop_held(pins, done);
	r = helper_task_stat(tid, starttime, prev_cpu);
	if (r < 0) {
		r = r == -ENOENT ? -ESRCH : r;
		goto out;
	}
	pin = pin_find(pins, tid);
	if (pin && pin->starttime == *starttime) {
		r = -EBUSY;	/* pinned already: by PIN, or another holder */
		goto out;
	}
	if (pin) {
		/* The tid was reused since: the old pin is void. */
		pin_remove(pins, pin);
		dropped = true;
	}
	if (pins->count == HELPER_MAX_PINS) {
		r = -EBUSY;
		goto out;
	}
	if (sched_getaffinity(tid, sizeof(*orig), orig) < 0) {
		r = -errno;
		goto out;
	}
	pin = &pins->pin[pins->count++];
	memset(pin, 0, sizeof(*pin));
	pin->tid = tid;
	pin->starttime = *starttime;
	pin->cpu = cpu;
	pin->pinned_ns = now_ns;
	pin->deadline_ns = UINT64_MAX;
	pin->by_holder = true;
	pin->orig = *orig;
	/* Journal first: the holder's change must never be unrecorded. */
	r = journal_write(pins);
	if (r < 0)
		pins->count--;
	return r;
out:
	if (dropped)
		journal_write(pins);
	return r;
}

void helper_pins_forget_held(struct helper_pins *pins, const cpu_set_t *done)
{
	if (drop_held(pins, done))
		journal_write(pins);
}

int helper_unpin(struct helper_pins *pins, pid_t tid, uint64_t now_ns,
		 uint64_t *held_ns)
{
	struct helper_pin *pin = pin_find(pins, tid);

	if (!pin || pin->by_holder)
		return -ENOENT;
	helper_pin_restore(pin);
	*held_ns = now_ns - pin->pinned_ns;
	pin_remove(pins, pin);
	return journal_write(pins);
}

/* Restore and drop the pins due by now_ns (holder pins only if held too). */
static unsigned int end_pins(struct helper_pins *pins, uint64_t now_ns,
			     bool held)
{
	unsigned int i = 0, n = 0;

	while (i < pins->count) {
		const struct helper_pin *pin = &pins->pin[i];

		if (pin->by_holder ? !held : pin->deadline_ns > now_ns) {
			i++;
			continue;
		}
		helper_pin_restore(pin);
		pin_remove(pins, &pins->pin[i]);
		n++;
	}
	if (n)
		journal_write(pins);
	return n;
}

unsigned int helper_pins_expire(struct helper_pins *pins, uint64_t now_ns)
{
	/* A holder's pin ends with its holder, not here. */
	return end_pins(pins, now_ns, false);
}

unsigned int helper_pins_release_all(struct helper_pins *pins)
{
	/*
	 * The holders were stopped first and restored their pins; restoring
	 * again is harmless, and covers a holder that could not (one kept
	 * off its CPU by a higher real-time thread past the stop's wait).
	 */
	return end_pins(pins, UINT64_MAX, true);
}

uint64_t helper_pins_next_deadline(const struct helper_pins *pins)
{
	uint64_t next = UINT64_MAX;
	unsigned int i;

	for (i = 0; i < pins->count; i++)
		if (!pins->pin[i].by_holder && pins->pin[i].deadline_ns < next)
			next = pins->pin[i].deadline_ns;
	return next;
}

int helper_journal_replay(const char *path, unsigned int *gone,
			  unsigned int *bad)
{
	struct helper_pins none;
	char *buf, *line, *save = NULL;
	int restored = 0;
	size_t len = 0;
	ssize_t n;
	FILE *f;

	*gone = 0;
	*bad = 0;
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	buf = malloc(JOURNAL_MAX_BYTES + 1);
	if (!buf) {
		fclose(f);
		return -ENOMEM;
	}
	while (len < JOURNAL_MAX_BYTES &&
	       (n = fread(buf + len, 1, JOURNAL_MAX_BYTES - len, f)) > 0)
		len += n;
	fclose(f);
	buf[len] = '\0';

	line = strtok_r(buf, "\n", &save);
	if (!line || strcmp(line, JOURNAL_MAGIC)) {
		*bad += line != NULL;
		line = NULL;
	}
	while (line && (line = strtok_r(NULL, "\n", &save))) {
		struct helper_pin pin;
		unsigned long long st;
		uint64_t now_st;
		int tid, used = 0;

		memset(&pin, 0, sizeof(pin));
		if (sscanf(line, "%d %llu %n", &tid, &st, &used) != 2 ||
		    !used || tid <= 0 ||
		    !parse_cpu_list(line + used, &pin.orig)) {
			(*bad)++;
			continue;
		}
		pin.tid = tid;
		pin.starttime = st;
		if (helper_task_stat(tid, &now_st, NULL) < 0 ||
		    now_st != pin.starttime) {
			(*gone)++;
			continue;
		}
		helper_pin_restore(&pin);
		restored++;
	}
	free(buf);
	/* Everything recorded is handled: start the new journal empty. */
	helper_pins_init(&none, path);
	n = journal_write(&none);
	helper_pins_deinit(&none);
	return n < 0 ? (int)n : restored;
}
