// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "profile/profile_file.h"
#include "profile/proc_info.h"

/* ---- capture side ---------------------------------------------------------- */

struct ivm_error *ivm_proc_info_cache_init(struct ivm_proc_info_cache *c,
					   const struct ivm_btf *btf,
					   uint32_t comm, uint32_t comm_size)
{
	struct ivm_error *err;

	memset(c, 0, sizeof(*c));
	err = ivm_proc_args_offsets_from_btf(btf, &c->args);
	if (!err)
		err = ivm_btf_offset(btf, "task_struct", "group_leader", 8,
				     &c->group_leader, NULL);
	if (err)
		return err;
	c->comm = comm;
	c->comm_size = comm_size < IVM_COMM_LEN - 1 ? comm_size :
						       IVM_COMM_LEN - 1;
	return NULL;
}

/* The process's name: its group leader's comm. */
static bool read_leader_comm(struct ivm_proc_info_cache *c,
			     const struct ivm_kmem_reader *kmem, int la57,
			     const struct ivm_proc_info_task *t,
			     uint64_t *leader, char comm[IVM_COMM_LEN])
{
	struct ivm_error *err;
	uint8_t p[8];

	memset(comm, 0, IVM_COMM_LEN);
	if (t->pid == t->tgid) {
		*leader = t->addr;
		snprintf(comm, IVM_COMM_LEN, "%s", t->comm);
		return true;
	}
	err = kmem->read(kmem->ctx, t->addr + c->group_leader, p, 8);
	if (!err) {
		*leader = ivm_le64(p);
		err = ivm_kmem_read_kernel(kmem, la57, *leader + c->comm, comm,
					   c->comm_size);
	}
	if (err) {
		ivm_error_destroy(err);
		memset(comm, 0, IVM_COMM_LEN);
		return false;
	}
	comm[IVM_COMM_LEN - 1] = '\0';
	return true;
}

void ivm_proc_info_cache_get(struct ivm_proc_info_cache *c,
			     const struct ivm_kmem_reader *kmem,
			     const struct ivm_kmem_reader *umem, int la57,
			     const struct ivm_proc_info_task *t,
			     uint64_t now_ns, struct ivm_proc_info *ret)
{
	struct ivm_proc_info_slot *s;
	char raw[IVM_TITLE_MAX];
	struct ivm_proc_args args;
	struct ivm_error *err;
	uint64_t leader = 0;
	bool ok;

	memset(ret, 0, sizeof(*ret));
	if (!t->mm)
		return;
	s = &c->slots[ivm_assoc_pick(&c->assoc, c->slots, sizeof(c->slots[0]),
				     offsetof(struct ivm_proc_info_slot, mm),
				     IVM_PROC_INFO_CACHE_SLOTS, c->used,
				     t->mm)];
	if (s->mm == t->mm && s->cr3 == t->cr3 &&
	    now_ns - s->read_ns < IVM_PROC_INFO_REFRESH_NS) {
		c->hits++;
		*ret = s->info;
		return;
	}
	c->reads++;
	s->mm = 0;
	ok = read_leader_comm(c, kmem, la57, t, &leader, ret->comm);
	err = ivm_proc_args_read(kmem, &c->args, t->mm, umem, la57, raw,
				 sizeof(raw), &args);
	if (err) {
		ivm_error_destroy(err);
		ok = false;
	} else {
		ivm_proc_args_display(raw, args.len, ret->title,
				      sizeof(ret->title));
	}
	if (!ok) {
		/* Not remembered: the next capture tries again. */
		c->failures++;
		return;
	}
	s->mm = t->mm;
	s->cr3 = t->cr3;
	s->leader = leader;
	s->read_ns = now_ns;
	s->info = *ret;
}

/* ---- file side ------------------------------------------------------------- */

struct proc_entry {
	uint32_t pid;
	bool used;
	struct ivm_proc_info *info;	/* NULL: nothing */
};

/*
 * Open addressing by pid at most half full, never deleting.  Entries hold
 * their info by pointer so an empty slot costs 16 bytes; the slots grow
 * with the processes said (a window of web01 says 20 to 50, a fork storm
 * thousands), from MIN_SLOTS up to MAX_SLOTS.
 */
struct ivm_proc_table {
	struct proc_entry *slots;
	size_t nr_slots;	/* a power of two */
	size_t used;
};

#define MIN_SLOTS 256
#define MAX_SLOTS (2 * (size_t)IVM_PROC_INFO_MAX)

struct ivm_error *ivm_proc_table_create(struct ivm_proc_table **ret)
{
	struct ivm_proc_table *t = calloc(1, sizeof(*t));

	if (!t)
		return &ivm_enomem;
	t->slots = calloc(MIN_SLOTS, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return &ivm_enomem;
	}
	t->nr_slots = MIN_SLOTS;
	*ret = t;
	return NULL;
}

static void clear(struct ivm_proc_table *t)
{
	size_t i;

	for (i = 0; i < t->nr_slots; i++)
		free(t->slots[i].info);
	memset(t->slots, 0, t->nr_slots * sizeof(*t->slots));
	t->used = 0;
}

void ivm_proc_table_destroy(struct ivm_proc_table *t)
{
	if (!t)
		return;
	clear(t);
	free(t->slots);
	free(t);
}

size_t ivm_proc_table_count(const struct ivm_proc_table *t)
{
	return t->used;
}

static struct proc_entry *find_in(struct proc_entry *slots, size_t nr,
				  uint32_t pid)
{
	size_t i = (size_t)ivm_hash_u64(pid) & (nr - 1);

	/* The table is never more than half full: this ends. */
	while (slots[i].used && slots[i].pid != pid)
		i = (i + 1) & (nr - 1);
	return &slots[i];
}

static struct proc_entry *find(const struct ivm_proc_table *t, uint32_t pid)
{
	return find_in(t->slots, t->nr_slots, pid);
}

/* Twice the slots, for one more entry; false without memory. */
static bool grow(struct ivm_proc_table *t)
{
	size_t nr = 2 * t->nr_slots, i;
	struct proc_entry *n = calloc(nr, sizeof(*n));

	if (!n)
		return false;
	for (i = 0; i < t->nr_slots; i++)
		if (t->slots[i].used)
			*find_in(n, nr, t->slots[i].pid) = t->slots[i];
	free(t->slots);
	t->slots = n;
	t->nr_slots = nr;
	return true;
}

static bool same_info(const struct ivm_proc_info *a,
		      const struct ivm_proc_info *b)
{
	return !strncmp(a->comm, b->comm, sizeof(a->comm)) &&
	       !strncmp(a->title, b->title, sizeof(a->title));
}

bool ivm_proc_table_set(struct ivm_proc_table *t, uint32_t pid,
			const struct ivm_proc_info *info)
{
	struct proc_entry *e = find(t, pid);
	struct ivm_proc_info *copy;

	if (e->used && same_info(e->info, info))
		return false;
	copy = malloc(sizeof(*copy));
	if (!copy)
		return false;
	snprintf(copy->comm, sizeof(copy->comm), "%s", info->comm);
	snprintf(copy->title, sizeof(copy->title), "%s", info->title);
	if (!e->used) {
		if (t->used == IVM_PROC_INFO_MAX) {
			clear(t);
			e = find(t, pid);
		} else if (2 * (t->used + 1) > t->nr_slots) {
			if (t->nr_slots == MAX_SLOTS || !grow(t)) {
				free(copy);
				return false;
			}
			e = find(t, pid);
		}
		e->used = true;
		e->pid = pid;
		t->used++;
	}
	free(e->info);
	e->info = copy;
	return true;
}

const struct ivm_proc_info *ivm_proc_table_get(const struct ivm_proc_table *t,
					       uint32_t pid)
{
	const struct proc_entry *e = find(t, pid);

	return e->used ? e->info : NULL;
}

struct ivm_error *ivm_proc_table_announce(struct ivm_proc_table *t,
					  struct ivm_profile_writer *w,
					  uint32_t pid,
					  const struct ivm_proc_info *info)
{
	char buf[IVM_TITLE_MAX + IVM_COMM_LEN + 16];

	if (!ivm_proc_table_set(t, pid, info))
		return NULL;
	return ivm_profile_write_meta(w, IVM_META_PROCESS,
				      ivm_proc_info_format(pid, info, buf,
							   sizeof(buf)));
}

/* s into out (size bytes) with control characters as '?'. */
static void printable(const char *s, char *out, size_t size)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < size; i++)
		out[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' :
								       s[i];
	out[i] = '\0';
}

char *ivm_proc_info_format(uint32_t pid, const struct ivm_proc_info *info,
			   char *buf, size_t size)
{
	char comm[IVM_COMM_LEN], title[IVM_TITLE_MAX + 1];

	printable(info->comm, comm, sizeof(comm));
	printable(info->title, title, sizeof(title));
	snprintf(buf, size, "%" PRIu32 "\t%s\t%s", pid, comm, title);
	return buf;
}

struct ivm_error *ivm_proc_info_parse(const char *value, uint32_t *pid,
				      struct ivm_proc_info *ret)
{
	const char *comm, *title;
	unsigned long long v;
	char *end;

	memset(ret, 0, sizeof(*ret));
	if (value[0] < '0' || value[0] > '9')
		return ivm_error_create(IVM_ERROR_INVALID,
					"process: no pid in '%.40s'", value);
	errno = 0;
	v = strtoull(value, &end, 10);
	if (errno || v > UINT32_MAX || *end != '\t')
		return ivm_error_create(IVM_ERROR_INVALID,
					"process: bad pid in '%.40s'", value);
	comm = end + 1;
	title = strchr(comm, '\t');
	if (!title)
		return ivm_error_create(IVM_ERROR_INVALID,
					"process: no title field in '%.40s'",
					value);
	*pid = (uint32_t)v;
	snprintf(ret->comm, sizeof(ret->comm), "%.*s",
		 (int)(title - comm < IVM_COMM_LEN ? title - comm :
						     IVM_COMM_LEN - 1), comm);
	snprintf(ret->title, sizeof(ret->title), "%s", title + 1);
	return NULL;
}
