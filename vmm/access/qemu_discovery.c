// SPDX-License-Identifier: MIT
/*
 * QEMU discovery through QMP: vCPU threads, the QEMU pid, guest RAM, and
 * vCPU registers.
 *
 * Guest RAM comes from HMP `info mtree -f` rather than QMP because QEMU
 * (7.2) has no QMP query for the memory map; the flat view is what the
 * guest actually sees after aliasing and overlaps are resolved.  Each RAM
 * range then gets its host address from HMP `gpa2hva`.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/hexnum.h"
#include "access/qemu_discovery.h"

#define MAX_CPU_INDEX (1 << 20)
#define QUOTE_MAX 48

static void quote(const char *p, size_t n, char out[QUOTE_MAX + 1])
{
	size_t i;

	while (n && (*p == ' ' || *p == '\r' || *p == '\n')) {
		p++;
		n--;
	}
	if (n > QUOTE_MAX)
		n = QUOTE_MAX;
	for (i = 0; i < n && p[i] != '\n' && p[i] != '\r'; i++)
		out[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
	out[i] = '\0';
}

static bool literal_at(const char *p, size_t end, size_t *pos, const char *lit)
{
	size_t n = strlen(lit);

	if (end - *pos < n || memcmp(p + *pos, lit, n))
		return false;
	*pos += n;
	return true;
}

/* ---- vCPUs ---------------------------------------------------------------- */

struct ivm_error *ivm_qemu_parse_vcpus(struct json_object *reply,
				       struct ivm_qemu_vcpus **ret)
{
	struct ivm_qemu_vcpus *vcpus;
	size_t i, j, n;

	if (!json_object_is_type(reply, json_type_array))
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"query-cpus-fast did not return a list");
	n = json_object_array_length(reply);
	if (!n || n > IVM_QEMU_MAX_VCPUS)
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"query-cpus-fast lists %zu vCPUs", n);
	vcpus = malloc(sizeof(*vcpus) + n * sizeof(vcpus->vcpu[0]));
	if (!vcpus)
		return &ivm_enomem;
	vcpus->nr = n;
	for (i = 0; i < n; i++) {
		struct json_object *cpu = json_object_array_get_idx(reply, i);
		struct json_object *index, *tid, *target;
		int64_t index_v, tid_v;

		if (!json_object_is_type(cpu, json_type_object) ||
		    !json_object_object_get_ex(cpu, "cpu-index", &index) ||
		    !json_object_is_type(index, json_type_int) ||
		    !json_object_object_get_ex(cpu, "thread-id", &tid) ||
		    !json_object_is_type(tid, json_type_int))
			goto bad;
		index_v = json_object_get_int64(index);
		tid_v = json_object_get_int64(tid);
		if (index_v < 0 || index_v >= MAX_CPU_INDEX || tid_v <= 0 ||
		    tid_v > INT_MAX)
			goto bad;
		if (json_object_object_get_ex(cpu, "target", &target) &&
		    (!json_object_is_type(target, json_type_string) ||
		     strcmp(json_object_get_string(target), "x86_64"))) {
			char q[QUOTE_MAX + 1];
			const char *t = json_object_is_type(target,
							    json_type_string) ?
						json_object_get_string(target) : "?";

			quote(t, strlen(t), q);
			free(vcpus);
			return ivm_error_create(IVM_ERROR_INVALID,
						"vCPU %" PRId64 " is a '%s' CPU; idlevm reads x86_64 guests",
						index_v, q);
		}
		vcpus->vcpu[i].index = (int)index_v;
		vcpus->vcpu[i].tid = (pid_t)tid_v;
		for (j = 0; j < i; j++) {
			if (vcpus->vcpu[j].index == vcpus->vcpu[i].index)
				goto bad;
		}
	}
	*ret = vcpus;
	return NULL;
bad:
	free(vcpus);
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"query-cpus-fast: bad entry %zu", i);
}

struct ivm_error *ivm_qemu_vcpus(struct ivm_qmp *qmp,
				 struct ivm_qemu_vcpus **ret)
{
	struct json_object *reply;
	struct ivm_error *err;

	err = ivm_qmp_execute(qmp, "query-cpus-fast", NULL, &reply);
	if (err)
		return err;
	err = ivm_qemu_parse_vcpus(reply, ret);
	json_object_put(reply);
	return err ? ivm_error_wrap(err, "%s", ivm_qmp_name(qmp)) : NULL;
}

/* ---- the QEMU process ----------------------------------------------------- */

/* Read at most size - 1 bytes of a small /proc file, NUL-terminated. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
	ssize_t n, total = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	while ((size_t)total < size - 1) {
		n = read(fd, buf + total, size - 1 - (size_t)total);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		total += n;
	}
	close(fd);
	buf[total] = '\0';
	return total;
}

static bool thread_of(const char *proc_root, pid_t pid, pid_t tid)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%d/task/%d", proc_root, (int)pid,
		 (int)tid);
	return access(path, F_OK) == 0;
}

static struct ivm_error *tgid_of(const char *proc_root, pid_t tid,
				 pid_t *ret)
{
	char path[PATH_MAX], status[8192], *p;
	long v;

	snprintf(path, sizeof(path), "%s/%d/status", proc_root, (int)tid);
	if (read_small(path, status, sizeof(status)) < 0)
		return ivm_error_os(errno, "%s", path);
	p = strstr(status, "\nTgid:");
	if (!p)
		return ivm_error_create(IVM_ERROR_PROTOCOL, "%s: no Tgid",
					path);
	errno = 0;
	v = strtol(p + 6, NULL, 10);
	if (errno || v <= 0 || v > INT_MAX)
		return ivm_error_create(IVM_ERROR_PROTOCOL, "%s: bad Tgid",
					path);
	*ret = (pid_t)v;
	return NULL;
}

/*
 * QEMU names its vCPU threads "CPU <n>/<accel>" (libvirt always asks it to
 * name threads); without thread names fall back to the executable's name.
 */
static bool looks_like_qemu(const char *proc_root, pid_t pid, pid_t vcpu_tid)
{
	char path[PATH_MAX], buf[PATH_MAX];
	const char *base;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%d/task/%d/comm", proc_root,
		 (int)pid, (int)vcpu_tid);
	if (read_small(path, buf, 32) >= 4 && !strncmp(buf, "CPU ", 4))
		return true;
	snprintf(path, sizeof(path), "%s/%d/exe", proc_root, (int)pid);
	n = readlink(path, buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	base = strrchr(buf, '/');
	return strstr(base ? base + 1 : buf, "qemu") != NULL;
}

struct ivm_error *ivm_qemu_pid(struct ivm_qmp *qmp,
			       const struct ivm_qemu_vcpus *vcpus,
			       const char *proc_root, pid_t *ret)
{
	struct ivm_qemu_vcpus *own = NULL;
	struct ivm_error *err = NULL;
	pid_t pid;
	size_t i;

	if (!proc_root)
		proc_root = "/proc";
	if (!vcpus) {
		err = ivm_qemu_vcpus(qmp, &own);
		if (err)
			return err;
		vcpus = own;
	}
	if (!ivm_qmp_is_libvirt(qmp)) {
		pid = ivm_qmp_peer_pid(qmp);
		if (pid <= 0) {
			err = ivm_error_create(IVM_ERROR_NOT_FOUND,
					       "%s: the socket's peer pid is unknown (another pid namespace?)",
					       ivm_qmp_name(qmp));
			goto out;
		}
	} else {
		err = tgid_of(proc_root, vcpus->vcpu[0].tid, &pid);
		if (err) {
			err = ivm_error_wrap(err, "%s: finding qemu from vCPU thread %d",
					     ivm_qmp_name(qmp),
					     (int)vcpus->vcpu[0].tid);
			goto out;
		}
	}
	for (i = 0; i < vcpus->nr; i++) {
		if (!thread_of(proc_root, pid, vcpus->vcpu[i].tid)) {
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "%s: vCPU %d thread %d is not a thread of pid %d (a proxy in front of the socket, or qemu is gone)",
					       ivm_qmp_name(qmp),
					       vcpus->vcpu[i].index,
					       (int)vcpus->vcpu[i].tid, (int)pid);
			goto out;
		}
	}
	if (!looks_like_qemu(proc_root, pid, vcpus->vcpu[0].tid)) {
		err = ivm_error_create(IVM_ERROR_PROTOCOL,
				       "%s: pid %d does not look like qemu (no 'CPU n/' vCPU thread, no qemu executable)",
				       ivm_qmp_name(qmp), (int)pid);
		goto out;
	}
	*ret = pid;
out:
	free(own);
	return err;
}

/* ---- guest RAM -------------------------------------------------------------- */

/*
 * One line of a flat view: "  START-END (prio P, TYPE): NAME[ @OFFSET]".
 * Returns false if the line is not a range line at all.
 */
static bool parse_range(const char *p, size_t start, size_t end, bool *is_ram,
			struct ivm_qemu_ram_piece *piece, bool *bad)
{
	size_t i = start, name_start, name_end, j;
	uint64_t first, last, offset = 0;
	bool kvm_slot;

	*bad = false;
	*is_ram = false;
	while (i < end && p[i] == ' ')
		i++;
	if (!ivm_hex_span(p, end, &i, &first) || !literal_at(p, end, &i, "-"))
		return false;
	*bad = true;
	if (!ivm_hex_span(p, end, &i, &last) || last < first ||
	    (first == 0 && last == UINT64_MAX))
		return true;
	if (!literal_at(p, end, &i, " (prio "))
		return true;
	if (i < end && p[i] == '-')
		i++;
	for (j = i; i < end && p[i] >= '0' && p[i] <= '9' && i - j < 12; i++)
		;
	if (i == j || !literal_at(p, end, &i, ", "))
		return true;
	if (literal_at(p, end, &i, "ram)") || literal_at(p, end, &i, "ram nv)")) {
		*is_ram = true;
	} else {
		/* Another type: rom, romd, ramd, i/o... */
		for (j = 0; i < end && p[i] != ')' && j < 16; i++, j++)
			;
		if (i >= end || p[i] != ')')
			return true;
		i++;
	}
	if (!literal_at(p, end, &i, ": "))
		return true;
	*bad = false;
	if (!*is_ram)
		return true;

	/*
	 * The name runs to the end, or to a trailing " @OFFSET", and under
	 * KVM to a last " KVM": QEMU marks each range that is a KVM memory
	 * slot with the accelerator's name (mtree_print_flatview asks the
	 * accelerator's has_memory hook).  TCG has no such hook and prints
	 * nothing, so the marker is also how a dump says what ran it.
	 */
	name_start = i;
	name_end = end;
	while (name_end > name_start && (p[name_end - 1] == '\r' ||
					 p[name_end - 1] == ' '))
		name_end--;
	kvm_slot = name_end - name_start > 4 &&
		   !memcmp(p + name_end - 4, " KVM", 4);
	if (kvm_slot)
		name_end -= 4;
	for (j = name_end; j > name_start; j--) {
		size_t k = j;

		if (p[j - 1] != '@' || j - 1 == name_start ||
		    p[j - 2] != ' ')
			continue;
		if (ivm_hex_span(p, name_end, &k, &offset) && k == name_end) {
			name_end = j - 2;
			break;
		}
		offset = 0;
	}
	memset(piece, 0, sizeof(*piece));
	piece->gpa = first;
	piece->size = last - first + 1;
	piece->offset = offset;
	piece->kvm_slot = kvm_slot;
	j = name_end - name_start;
	if (j >= sizeof(piece->name))
		j = sizeof(piece->name) - 1;
	for (i = 0; i < j; i++) {
		char c = p[name_start + i];

		piece->name[i] = (c >= 0x20 && c < 0x7f) ? c : '?';
	}
	return true;
}

struct ivm_error *ivm_qemu_parse_mtree_ram(const char *text, size_t len,
					   struct ivm_qemu_ram_map **ret)
{
	struct ivm_qemu_ram_piece *pieces = NULL, piece;
	struct ivm_qemu_ram_map *map;
	struct ivm_error *err = NULL;
	size_t start = 0, end, nr = 0, cap = 0;
	bool in_memory = false, found = false, done = false;

	for (; start < len && !done; start = end + 1) {
		const char *nl = memchr(text + start, '\n', len - start);
		size_t i = start;
		bool is_ram, bad;

		end = nl ? (size_t)(nl - text) : len;
		if (literal_at(text, end, &i, "FlatView #")) {
			/* The view of "memory" has ended at the next one. */
			done = in_memory;
			in_memory = false;
			continue;
		}
		i = start;
		if (literal_at(text, end, &i, " AS \"memory\",")) {
			if (found) {
				err = ivm_error_create(IVM_ERROR_PROTOCOL,
						       "info mtree: two views of \"memory\"");
				goto fail;
			}
			in_memory = found = true;
			continue;
		}
		if (!in_memory || !parse_range(text, start, end, &is_ram,
					       &piece, &bad))
			continue;
		if (bad) {
			char q[QUOTE_MAX + 1];

			quote(text + start, end - start, q);
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "info mtree: bad range line \"%s\"",
					       q);
			goto fail;
		}
		if (!is_ram)
			continue;
		if (nr) {
			struct ivm_qemu_ram_piece *prev = &pieces[nr - 1];
			uint64_t prev_end = prev->gpa + prev->size;

			/* prev->size >= 1 and gpa + size - 1 fit: no overflow
			 * unless the range ended at 2^64 - 1. */
			if (prev_end == 0 || piece.gpa < prev_end) {
				err = ivm_error_create(IVM_ERROR_PROTOCOL,
						       "info mtree: RAM ranges out of order or overlapping at 0x%" PRIx64,
						       piece.gpa);
				goto fail;
			}
			if (piece.gpa == prev_end &&
			    !strcmp(piece.name, prev->name) &&
			    piece.kvm_slot == prev->kvm_slot &&
			    prev->offset + prev->size == piece.offset &&
			    prev->offset + prev->size > prev->offset &&
			    prev->size + piece.size > prev->size) {
				prev->size += piece.size;
				continue;
			}
		}
		if (nr == IVM_QEMU_MAX_RAM_PIECES) {
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "info mtree: more than %d RAM ranges",
					       IVM_QEMU_MAX_RAM_PIECES);
			goto fail;
		}
		if (nr == cap) {
			size_t ncap = cap ? cap * 2 : 8;
			struct ivm_qemu_ram_piece *n;

			n = realloc(pieces, ncap * sizeof(*n));
			if (!n) {
				err = &ivm_enomem;
				goto fail;
			}
			pieces = n;
			cap = ncap;
		}
		pieces[nr++] = piece;
	}
	if (!found || !nr) {
		err = ivm_error_create(IVM_ERROR_PROTOCOL,
				       found ? "info mtree: no RAM in the \"memory\" address space" :
					       "info mtree: no flat view of the \"memory\" address space");
		goto fail;
	}
	map = malloc(sizeof(*map) + nr * sizeof(map->piece[0]));
	if (!map) {
		err = &ivm_enomem;
		goto fail;
	}
	map->nr = nr;
	memcpy(map->piece, pieces, nr * sizeof(map->piece[0]));
	free(pieces);
	*ret = map;
	return NULL;
fail:
	free(pieces);
	return err;
}

struct ivm_error *ivm_qemu_parse_gpa2hva(const char *text, uint64_t gpa,
					 const char *name, uint64_t *ret)
{
	size_t len = strlen(text), i = 0, end, name_start, k;
	const char *nl = memchr(text, '\n', len);
	char q[QUOTE_MAX + 1];
	uint64_t echo, hva;

	end = nl ? (size_t)(nl - text) : len;
	while (end > 0 && (text[end - 1] == '\r' || text[end - 1] == ' '))
		end--;
	if (!literal_at(text, end, &i, "Host virtual address for 0x")) {
		quote(text, len, q);
		if (!strncmp(text, "Memory at address", 17) ||
		    !strncmp(text, "No memory is mapped", 19))
			return ivm_error_create(IVM_ERROR_NOT_FOUND,
						"gpa2hva 0x%" PRIx64 ": %s",
						gpa, q);
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"gpa2hva 0x%" PRIx64 ": unexpected answer \"%s\"",
					gpa, q);
	}
	if (!ivm_hex_span(text, end, &i, &echo) || echo != gpa ||
	    !literal_at(text, end, &i, " ("))
		goto bad;
	name_start = i;
	/* The name may hold anything; the last ") is 0x" ends it. */
	for (k = end; k > name_start; k--) {
		size_t j = k - 1;

		if (literal_at(text, end, &j, ") is 0x"))
			break;
	}
	if (k == name_start)
		goto bad;
	i = k - 1 + strlen(") is 0x");
	if (!ivm_hex_span(text, end, &i, &hva) || i != end)
		goto bad;
	if (name && strlen(name) < 63 &&
	    (k - 1 - name_start != strlen(name) ||
	     memcmp(text + name_start, name, strlen(name)))) {
		quote(text, len, q);
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"gpa2hva 0x%" PRIx64 ": expected region %s, qemu said \"%s\"",
					gpa, name, q);
	}
	*ret = hva;
	return NULL;
bad:
	quote(text, len, q);
	return ivm_error_create(IVM_ERROR_PROTOCOL,
				"gpa2hva 0x%" PRIx64 ": malformed answer \"%s\"",
				gpa, q);
}

struct ivm_error *ivm_qemu_ram_regions(struct ivm_qmp *qmp,
				       struct ivm_qemu_ram **ret)
{
	struct ivm_qemu_ram_map *map = NULL;
	struct ivm_qemu_ram *ram = NULL;
	struct ivm_error *err;
	char *text = NULL;
	size_t i;

	err = ivm_qmp_hmp(qmp, "info mtree -f", &text);
	if (err)
		return err;
	err = ivm_qemu_parse_mtree_ram(text, strlen(text), &map);
	free(text);
	text = NULL;
	if (err)
		goto out;
	ram = malloc(sizeof(*ram) + map->nr * sizeof(ram->region[0]));
	if (!ram) {
		err = &ivm_enomem;
		goto out;
	}
	ram->nr = map->nr;
	for (i = 0; i < map->nr; i++) {
		struct ivm_qemu_ram_piece *piece = &map->piece[i];
		char cmd[64];
		uint64_t hva;

		snprintf(cmd, sizeof(cmd), "gpa2hva 0x%" PRIx64, piece->gpa);
		err = ivm_qmp_hmp(qmp, cmd, &text);
		if (err)
			goto out;
		err = ivm_qemu_parse_gpa2hva(text, piece->gpa, piece->name,
					     &hva);
		free(text);
		text = NULL;
		if (err)
			goto out;
		if (hva + piece->size < hva) {
			err = ivm_error_create(IVM_ERROR_PROTOCOL,
					       "gpa2hva 0x%" PRIx64 ": host range wraps",
					       piece->gpa);
			goto out;
		}
		ram->region[i].gpa = piece->gpa;
		ram->region[i].size = piece->size;
		ram->region[i].hva = hva;
	}
	*ret = ram;
	ram = NULL;
out:
	free(map);
	free(ram);
	return err ? ivm_error_wrap(err, "%s: guest RAM layout",
				    ivm_qmp_name(qmp)) : NULL;
}

/* ---- registers -------------------------------------------------------------- */

struct ivm_error *ivm_qemu_registers_all(struct ivm_qmp *qmp,
					 struct ivm_qemu_registers **ret)
{
	struct ivm_error *err;
	char *text;

	err = ivm_qmp_hmp(qmp, "info registers -a", &text);
	if (err)
		return err;
	err = ivm_qemu_parse_registers(text, strlen(text), ret);
	free(text);
	return err ? ivm_error_wrap(err, "%s", ivm_qmp_name(qmp)) : NULL;
}

struct ivm_error *ivm_qemu_registers(struct ivm_qmp *qmp, int cpu_index,
				     struct ivm_qemu_cpu_regs *ret)
{
	struct ivm_qemu_registers *regs;
	struct ivm_error *err;
	char *text;

	err = ivm_qmp_hmp_cpu(qmp, cpu_index, "info registers", &text);
	if (err)
		return err;
	err = ivm_qemu_parse_registers(text, strlen(text), &regs);
	free(text);
	if (err)
		return ivm_error_wrap(err, "%s", ivm_qmp_name(qmp));
	if (regs->nr != 1 || (regs->cpu[0].cpu_index != cpu_index &&
			      regs->cpu[0].cpu_index != -1)) {
		free(regs);
		return ivm_error_create(IVM_ERROR_PROTOCOL,
					"%s: info registers for vCPU %d answered with another vCPU",
					ivm_qmp_name(qmp), cpu_index);
	}
	*ret = regs->cpu[0];
	ret->cpu_index = cpu_index;
	free(regs);
	return NULL;
}
