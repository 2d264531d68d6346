// SPDX-License-Identifier: MIT
/*
 * idlevm maps: a guest process's memory mappings, read from the host as
 * the guest's /proc/PID/maps shows them, with the build-id of each ELF
 * file whose first page guest memory holds; and, for checking, the bytes
 * of a mapped file as guest memory holds them (--read-file).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/text_safe.h"
#include "cmd/commands.h"
#include "kernel/gfile.h"
#include "kernel/guest.h"
#include "kernel/mm_maps.h"
#include "unwind/uunwind_exe.h"

/* /proc/PID/maps pads the fields before a name to this many columns. */
#define MAPS_NAME_COLUMN 72
/* A tree that changed under the walk (live guest) is walked again. */
#define MAPS_TRIES 3
/* Files whose build-id is remembered per run. */
#define MAX_BUILD_IDS 256

static void maps_usage(FILE *out)
{
	fprintf(out,
"usage: idlevm maps (--domain NAME | --qmp PATH | --core FILE)\n"
"                   (--pid PID | --all) [options]\n"
"\n"
"Print a guest process's memory mappings as its /proc/PID/maps shows them,\n"
"read from guest memory (the kernel's VMAs), each ELF file's build-id after\n"
"a tab on the line that maps its first page, when guest memory holds that\n"
"page (the process's own mapping, or the file's page cache).\n"
"\n"
IVM_GUEST_USAGE
"  -p, --pid PID        the guest process\n"
"  -a, --all            every guest process, each after a '# pid' line\n"
"  -r, --read-file PATH:OFFSET:LENGTH\n"
"                       instead, write LENGTH bytes at OFFSET of the file\n"
"                       PATH that the process maps (or, with --all, any\n"
"                       process) to stdout, as guest memory holds them;\n"
"                       bytes it does not hold are zero, and stderr says\n"
"                       which (numbers in C syntax: 0x1000, 4096)\n"
"      --page-cache     with --read-file: only from the file's page cache,\n"
"                       not from the process's mapping\n"
"  -h, --help           this help\n");
}

struct build_id_memo {
	uint64_t inode;
	uint32_t generation;
	bool found;
	uint8_t id[IVM_UBINARY_MAX_BUILD_ID];
	size_t len;
};

struct maps_run {
	struct ivm_guest *g;
	struct ivm_mm_source src;
	struct ivm_gfile *gfile;	/* NULL: no page cache, no build-ids */
	struct build_id_memo ids[MAX_BUILD_IDS];
	size_t nr_ids;
};

/* A process's user memory, through its own page tables. */
struct process_mem {
	struct ivm_kmem_gmem umem;
	struct ivm_kmem_reader reader;
	struct ivm_gfile_space space;
	bool has_space;
};

static void process_mem_init(struct maps_run *r,
			     const struct ivm_guest_task *t,
			     const struct ivm_mm_maps *maps,
			     struct process_mem *pm)
{
	struct ivm_error *err;
	uint64_t cr3;

	memset(pm, 0, sizeof(*pm));
	err = ivm_kernel_task_user_cr3(r->g->layout, t, &cr3);
	if (err) {
		ivm_error_destroy(err);
		return;
	}
	pm->umem.gmem = r->g->gmem;
	pm->umem.cr3 = cr3;
	pm->umem.la57 = ivm_kernel_layout_la57(r->g->layout);
	ivm_kmem_reader_gmem(&pm->umem, &pm->reader);
	pm->space.maps = maps;
	pm->space.umem = &pm->reader;
	pm->has_space = true;
}

/* The build-id of the file v maps, once per file per run. */
static const struct build_id_memo *build_id_of(struct maps_run *r,
					      const struct ivm_vma *v,
					      const struct process_mem *pm)
{
	struct ivm_gfile_file f = {
		.g = r->gfile, .file = &v->file,
		.own = pm->has_space ? &pm->space : NULL,
	};
	struct ivm_kmem_reader reader;
	struct build_id_memo *m;
	struct ivm_error *err;
	size_t i;

	for (i = 0; i < r->nr_ids; i++)
		if (r->ids[i].inode == v->file.inode &&
		    r->ids[i].generation == v->file.generation)
			return &r->ids[i];
	if (!r->gfile)
		return NULL;
	ivm_gfile_file_reader(&f, &reader);
	m = &r->ids[r->nr_ids < MAX_BUILD_IDS ? r->nr_ids++ :
		    MAX_BUILD_IDS - 1];
	memset(m, 0, sizeof(*m));
	m->inode = v->file.inode;
	m->generation = v->file.generation;
	err = ivm_uexe_file_build_id(&reader, m->id, &m->len);
	m->found = !err;
	ivm_error_destroy(err);
	return m;
}

/* A path as /proc/PID/maps escapes it: a newline as \012. */
/*
 * A path as /proc/PID/maps shows it ("\012" for a newline), and every
 * other byte a terminal would act on escaped (text_safe.h): the guest
 * names its files.
 */
static void print_path(const char *p)
{
	char safe[IVM_TEXT_SAFE_SIZE(256)];
	size_t n;

	while (*p) {
		n = strcspn(p, "\n");
		while (n) {
			size_t k = n < 256 ? n : 256;

			/* Whole characters only: cut before a UTF-8 tail. */
			while (k < n && k > 1 && ((unsigned char)p[k] & 0xc0) == 0x80)
				k--;
			fputs(ivm_text_safe_n(safe, sizeof(safe), p, k), stdout);
			p += k;
			n -= k;
		}
		if (*p == '\n') {
			fputs("\\012", stdout);
			p++;
		}
	}
}

static void print_vma(struct maps_run *r, const struct ivm_vma *v,
		      const struct process_mem *pm)
{
	const struct build_id_memo *id = NULL;
	char hex[2 * IVM_UBINARY_MAX_BUILD_ID + 1];
	int n;

	n = printf("%08" PRIx64 "-%08" PRIx64 " %c%c%c%c %08" PRIx64
		   " %02x:%02x %" PRIu64 " ", v->start, v->end,
		   v->prot & IVM_VMA_READ ? 'r' : '-',
		   v->prot & IVM_VMA_WRITE ? 'w' : '-',
		   v->prot & IVM_VMA_EXEC ? 'x' : '-',
		   v->prot & IVM_VMA_SHARED ? 's' : 'p', v->pgoff,
		   (unsigned int)(v->file.dev >> 20),
		   (unsigned int)(v->file.dev & 0xfffff), v->file.ino);
	/* seq_pad(): blanks up to the column, then one more. */
	if (v->path || v->name)
		printf("%*s ", n < MAPS_NAME_COLUMN ? MAPS_NAME_COLUMN - n : 0,
		       "");
	if (v->path) {
		print_path(v->path);
		if (v->path_state != IVM_VMA_PATH_FULL)
			printf(" (path %s)",
			       v->path_state == IVM_VMA_PATH_CUT ?
			       "cut" : "unreadable above here");
	} else if (v->name) {
		print_path(v->name);
	}
	if (ivm_vma_is_file(v) && v->pgoff == 0)
		id = build_id_of(r, v, pm);
	if (id && id->found)
		printf("\tbuild-id=%s", ivm_build_id_hex(id->id, id->len, hex));
	putchar('\n');
}

/* The VMAs of t's process, walked again if the tree moved under us. */
static struct ivm_error *read_maps(struct maps_run *r,
				   const struct ivm_guest_task *t,
				   struct ivm_mm_maps **ret)
{
	struct ivm_error *err = NULL;
	int tries;

	for (tries = 1;; tries++) {
		err = ivm_mm_maps_read(&r->src, t->mm, 0, ret);
		if (err || !ivm_mm_maps_truncated(*ret) || !r->g->qmp ||
		    tries == MAPS_TRIES)
			return err;
		ivm_mm_maps_destroy(*ret);
	}
}

static int print_process(struct maps_run *r, const struct ivm_guest_task *t,
			 bool header)
{
	struct ivm_mm_maps *maps;
	const struct ivm_error *trunc;
	struct process_mem pm;
	struct ivm_error *err;
	size_t i;

	err = read_maps(r, t, &maps);
	if (err) {
		fprintf(stderr, "idlevm maps: pid %d: %s\n", t->tgid,
			ivm_error_string(err));
		ivm_error_destroy(err);
		return 1;
	}
	process_mem_init(r, t, maps, &pm);
	if (header) {
		char comm[IVM_TEXT_SAFE_SIZE(sizeof(t->comm))];

		printf("# pid %d (%s)\n", t->tgid,
		       ivm_text_safe_n(comm, sizeof(comm), t->comm,
				       sizeof(t->comm)));
	}
	for (i = 0; i < ivm_mm_maps_count(maps); i++)
		print_vma(r, ivm_mm_maps_get(maps, i), &pm);
	trunc = ivm_mm_maps_truncated(maps);
	if (trunc)
		fprintf(stderr, "idlevm maps: pid %d: list cut after %zu mappings: %s\n",
			t->tgid, ivm_mm_maps_count(maps),
			ivm_error_string(trunc));
	ivm_mm_maps_destroy(maps);
	return trunc ? 1 : 0;
}

struct read_request {
	char *path;
	uint64_t off, len;
	bool page_cache_only;
};

static bool parse_read_request(char *arg, struct read_request *rq)
{
	char *len = strrchr(arg, ':'), *off, *end;

	if (!len || len == arg)
		return false;
	*len++ = '\0';
	off = strrchr(arg, ':');
	if (!off || off == arg)
		return false;
	*off++ = '\0';
	rq->path = arg;
	rq->off = strtoull(off, &end, 0);
	if (!*off || *end)
		return false;
	rq->len = strtoull(len, &end, 0);
	return *len && !*end && rq->len <= IVM_GFILE_MAX_READ;
}

static const char *source_names(unsigned int s)
{
	static char buf[96];

	buf[0] = '\0';
	if (s & IVM_GFILE_OWN_MAPPING)
		strcat(buf, ", its own mapping");
	if (s & IVM_GFILE_PAGE_CACHE)
		strcat(buf, ", the page cache");
	if (s & IVM_GFILE_OTHER_MAPPING)
		strcat(buf, ", another process's mapping");
	if (s & IVM_GFILE_CACHED)
		strcat(buf, ", read before");
	return buf[0] ? buf + 2 : "nowhere";
}

/*
 * Write the requested bytes of the file at rq->path mapped by t's
 * process; 1 when the process does not map it (try the next), 0 done,
 * and -1 - status on failure.
 */
static int read_file(struct maps_run *r, const struct ivm_guest_task *t,
		     const struct read_request *rq)
{
	struct ivm_gfile_read_info info;
	const struct ivm_guest_file *file = NULL;
	struct ivm_mm_maps *maps;
	struct process_mem pm;
	struct ivm_error *err;
	const char *exe_path;
	uint8_t *buf;
	size_t i;

	err = read_maps(r, t, &maps);
	if (err) {
		ivm_error_destroy(err);
		return 1;
	}
	for (i = 0; i < ivm_mm_maps_count(maps) && !file; i++) {
		const struct ivm_vma *v = ivm_mm_maps_get(maps, i);

		if (v->path && v->path_state == IVM_VMA_PATH_FULL &&
		    !strcmp(v->path, rq->path))
			file = &v->file;
	}
	if (!file && (file = ivm_mm_maps_exe(maps, &exe_path)) &&
	    (!exe_path || strcmp(exe_path, rq->path)))
		file = NULL;
	if (!file) {
		ivm_mm_maps_destroy(maps);
		return 1;
	}
	process_mem_init(r, t, maps, &pm);
	buf = malloc(rq->len ? rq->len : 1);
	if (!buf) {
		ivm_mm_maps_destroy(maps);
		return -1 - ivm_error_report(&ivm_enomem);
	}
	err = ivm_gfile_read(r->gfile, file,
			     pm.has_space && !rq->page_cache_only ?
			     &pm.space : NULL, NULL, 0, rq->off, buf,
			     rq->len, &info);
	if (err) {
		free(buf);
		ivm_mm_maps_destroy(maps);
		return -1 - ivm_error_report(err);
	}
	fwrite(buf, 1, rq->len, stdout);
	fprintf(stderr, "idlevm maps: %s (pid %d, inode %" PRIu64
		"): %zu of %" PRIu64 " bytes at 0x%" PRIx64 " from %s",
		rq->path, t->tgid, file->ino, info.present, rq->len, rq->off,
		source_names(info.sources));
	if (info.first_absent != UINT64_MAX)
		fprintf(stderr, "; not in guest memory from 0x%" PRIx64
			" (%zu page%s%s)", info.first_absent,
			info.absent_pages, info.absent_pages == 1 ? "" : "s",
			info.past_eof ? ", and past the end of the file" : "");
	fputc('\n', stderr);
	free(buf);
	ivm_mm_maps_destroy(maps);
	return 0;
}

static void maps_run_init(struct maps_run *r, struct ivm_guest *g)
{
	struct ivm_gfile_config cfg;
	struct ivm_error *err;

	err = ivm_gfile_config_init(&cfg, g->layout, g->btf);
	if (!err)
		err = ivm_gfile_create(&cfg, &r->gfile);
	if (err) {
		fprintf(stderr, "idlevm maps: no page cache reads, so no build-ids: %s\n",
			ivm_error_string(err));
		ivm_error_destroy(err);
		r->gfile = NULL;
	}
}

/* The task that stands for process pid: one with an address space. */
static const struct ivm_guest_task *
process_task(const struct ivm_guest_task_list *list, long pid)
{
	size_t i;

	for (i = 0; i < list->nr; i++)
		if (list->tasks[i].tgid == pid && list->tasks[i].mm &&
		    !list->tasks[i].is_idle)
			return &list->tasks[i];
	return NULL;
}

int ivm_cmd_maps(int argc, char **argv)
{
	static const struct option longopts[] = {
		IVM_GUEST_LONGOPTS,
		{ "pid", required_argument, NULL, 'p' },
		{ "all", no_argument, NULL, 'a' },
		{ "read-file", required_argument, NULL, 'r' },
		{ "page-cache", no_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct ivm_guest_options opts = { 0 };
	struct ivm_guest_task_list *list = NULL;
	struct read_request rq = { 0 };
	struct maps_run *r = NULL;
	struct ivm_error *err;
	bool all = false, header;
	long pid = -1;
	int c, rc = 0, done = 0;
	char *end;
	size_t i;

	optind = 1;
	while ((c = getopt_long(argc, argv, IVM_GUEST_SHORTOPTS "p:ar:h",
				longopts, NULL)) != -1) {
		if (ivm_guest_parse_option(&opts, c, optarg))
			continue;
		switch (c) {
		case 'p':
			pid = strtol(optarg, &end, 10);
			if (*end || !*optarg || pid < 0) {
				fprintf(stderr, "idlevm maps: bad pid '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'a':
			all = true;
			break;
		case 'r':
			if (!parse_read_request(optarg, &rq)) {
				fprintf(stderr, "idlevm maps: --read-file wants PATH:OFFSET:LENGTH (at most %u bytes)\n",
					IVM_GFILE_MAX_READ);
				return 2;
			}
			break;
		case 'P':
			rq.page_cache_only = true;
			break;
		case 'h':
			maps_usage(stdout);
			return 0;
		default:
			maps_usage(stderr);
			return 2;
		}
	}
	if (optind != argc || all == (pid >= 0)) {
		fprintf(stderr, "idlevm maps: give exactly one of --pid and --all\n");
		return 2;
	}
	if (rq.page_cache_only && !rq.path) {
		fprintf(stderr, "idlevm maps: --page-cache goes with --read-file\n");
		return 2;
	}
	err = ivm_guest_check_options(&opts);
	if (err) {
		fprintf(stderr, "idlevm maps: %s\n", ivm_error_string(err));
		ivm_error_destroy(err);
		return 2;
	}
	r = calloc(1, sizeof(*r));
	if (!r)
		return ivm_error_report(&ivm_enomem);
	err = ivm_guest_open(&opts, &r->g);
	if (!err)
		err = ivm_mm_source_init(&r->src, r->g->layout, r->g->btf);
	if (!err)
		err = ivm_kernel_task_list(r->g->layout, 0, &list);
	if (err) {
		rc = ivm_error_report(err);
		goto out;
	}
	maps_run_init(r, r->g);
	if (rq.path && !r->gfile) {
		rc = 1;
		goto out;
	}
	header = all && !rq.path;
	for (i = 0; i < list->nr; i++) {
		const struct ivm_guest_task *t = &list->tasks[i];
		int res;

		/* One task per process: its first with an address space. */
		if (!t->mm || t->is_idle ||
		    (pid >= 0 && t->tgid != pid) ||
		    process_task(list, t->tgid) != t)
			continue;
		if (!rq.path) {
			if (header && done)
				putchar('\n');
			rc |= print_process(r, t, header);
			done++;
			continue;
		}
		res = read_file(r, t, &rq);
		if (res == 1)
			continue;
		if (res < 0)
			rc = -1 - res;
		done++;
		break;
	}
	if (!done) {
		if (rq.path && pid >= 0)
			fprintf(stderr, "idlevm maps: guest process %ld does not map %s\n",
				pid, rq.path);
		else if (rq.path)
			fprintf(stderr, "idlevm maps: no guest process maps %s\n",
				rq.path);
		else
			fprintf(stderr, "idlevm maps: no guest process %ld with an address space%s\n",
				pid, list->truncated ?
				" (the task list was truncated)" : "");
		rc = 1;
	}
out:
	if (r) {
		ivm_gfile_destroy(r->gfile);
		ivm_guest_task_list_destroy(list);
		ivm_guest_close(r->g);
		free(r);
	}
	return rc;
}
