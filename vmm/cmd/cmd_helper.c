// SPDX-License-Identifier: MIT
/*
 * idlevm helper: talk to the in-guest helper (hello, ping), through a
 * libvirt domain's channel or a plain QEMU's helper socket.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd/commands.h"
#include "access/helper_client.h"
#include "access/libvirt_domain.h"

#define MAX_PING_COUNT 100000

static void usage(FILE *out)
{
	fprintf(out,
		"usage: idlevm helper (--domain NAME [--connect URI] | --socket PATH)\n"
		"                     [--timeout MS] hello|ping [--count N]|maps --pid PID\n"
		"\n"
		"  hello          print what the helper tells of the guest, one\n"
		"                 'key: value' per line\n"
		"  ping           measure round trips to the helper\n"
		"  maps           the mappings of guest process PID, with the\n"
		"                 build-ids of the files behind them\n"
		"\n"
		"  -d, --domain NAME   libvirt domain; its channel %s\n"
		"  -c, --connect URI   libvirt URI (default qemu:///system)\n"
		"  -s, --socket PATH   unix socket of the channel (plain QEMU)\n"
		"  -t, --timeout MS    per-request timeout (default %d)\n"
		"  -n, --count N       pings to send (default 1)\n"
		"  -p, --pid PID       guest process for maps\n"
		"  -h, --help          this help\n",
		IVM_PROTO_PORT_NAME, IVM_HELPER_TIMEOUT_MS);
}

/* The socket path of the domain's helper channel. */
static struct ivm_error *domain_socket(const char *uri, const char *name,
				       char **ret)
{
	struct ivm_libvirt_domain *dom;
	struct ivm_error *err;

	err = ivm_libvirt_domain_open(uri, name, &dom);
	if (err)
		return err;
	err = ivm_libvirt_channel_path(ivm_libvirt_domain_ptr(dom), name,
				       IVM_PROTO_PORT_NAME, ret);
	ivm_libvirt_domain_close(dom);
	if (err && err->code == IVM_ERROR_NOT_FOUND)
		err = ivm_error_wrap(err,
				     "no helper channel (add a <channel type='unix'> with <target type='virtio' name='%s'/> to the domain)",
				     IVM_PROTO_PORT_NAME);
	return err;
}

static int do_hello(struct ivm_helper *helper, const char *path)
{
	struct ivm_helper_hello hello;
	struct ivm_error *err;
	char caps[128];

	err = ivm_helper_hello(helper, &hello);
	if (err)
		return ivm_error_report(err);
	idlevm_caps_string(hello.caps, caps, sizeof(caps));
	printf("protocol: %u\n", hello.protocol);
	printf("helper: %s\n", hello.helper_version);
	printf("helper_pid: %u\n", hello.pid);
	printf("kernel: %s\n", hello.kernel_release);
	printf("cpus: %u\n", hello.ncpus);
	if (hello.kaslr_known)
		printf("kaslr_offset: 0x%llx\n",
		       (unsigned long long)hello.kaslr_offset);
	else
		printf("kaslr_offset: unknown\n");
	printf("capabilities: %s\n", caps);
	printf("socket: %s\n", path);
	return 0;
}

static struct ivm_error *print_map(const struct idlevm_map_entry *e,
				   void *arg)
{
	char id[2 * IVM_PROTO_MAX_BUILD_ID + 1];
	unsigned int i;

	(void)arg;
	for (i = 0; i < e->build_id_len; i++)
		snprintf(id + 2 * i, 3, "%02x", e->build_id[i]);
	id[2 * i] = '\0';
	/* The path is the guest's: printed bounded, and the decoder has
	 * refused NULs; control characters are the terminal's problem no
	 * more than in /proc/PID/maps itself. */
	printf("%016llx-%016llx %c%c%c%c %08llx %02x:%02x %llu %.*s%s%s\n",
	       (unsigned long long)e->start, (unsigned long long)e->end,
	       e->prot & IVM_MAP_R ? 'r' : '-', e->prot & IVM_MAP_W ? 'w' : '-',
	       e->prot & IVM_MAP_X ? 'x' : '-',
	       e->prot & IVM_MAP_SHARED ? 's' : 'p',
	       (unsigned long long)e->offset, e->dev_major, e->dev_minor,
	       (unsigned long long)e->inode, (int)e->path.len, e->path.ptr,
	       e->build_id_len ? " build_id=" : "", id);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int do_ping(struct ivm_helper *helper, long count)
{
	uint64_t *rtt = calloc(count, sizeof(*rtt));
	struct ivm_error *err;
	long i;

	if (!rtt)
		return ivm_error_report(&ivm_enomem);
	for (i = 0; i < count; i++) {
		err = ivm_helper_ping(helper, &rtt[i]);
		if (err) {
			free(rtt);
			return ivm_error_report(ivm_error_wrap(err,
							       "ping %ld", i + 1));
		}
		if (count <= 20)
			printf("ping %ld: %.3f ms\n", i + 1, rtt[i] / 1e6);
	}
	qsort(rtt, count, sizeof(*rtt), cmp_u64);
	printf("%ld pings: min %.3f ms, median %.3f ms, max %.3f ms\n", count,
	       rtt[0] / 1e6, rtt[count / 2] / 1e6, rtt[count - 1] / 1e6);
	free(rtt);
	return 0;
}

int ivm_cmd_helper(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "domain", required_argument, NULL, 'd' },
		{ "connect", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "count", required_argument, NULL, 'n' },
		{ "pid", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *domain = NULL, *uri = NULL, *socket_path = NULL;
	const char *action;
	long count = 1, timeout_ms = IVM_HELPER_TIMEOUT_MS, pid = 0;
	struct ivm_helper *helper;
	struct ivm_error *err;
	char *path = NULL, *end;
	int c, r;

	optind = 0;	/* full getopt reset: argv is ours, not main's */
	while ((c = getopt_long(argc, argv, "d:c:s:t:n:p:h", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			domain = optarg;
			break;
		case 'c':
			uri = optarg;
			break;
		case 's':
			socket_path = optarg;
			break;
		case 't':
			timeout_ms = strtol(optarg, &end, 10);
			if (*end || timeout_ms <= 0 || timeout_ms > 3600000) {
				fprintf(stderr, "idlevm: bad --timeout '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'n':
			count = strtol(optarg, &end, 10);
			if (*end || count <= 0 || count > MAX_PING_COUNT) {
				fprintf(stderr,
					"idlevm: bad --count '%s' (1 to %d)\n",
					optarg, MAX_PING_COUNT);
				return 2;
			}
			break;
		case 'p':
			pid = strtol(optarg, &end, 10);
			if (*end || pid <= 0 || pid > INT32_MAX) {
				fprintf(stderr, "idlevm: bad --pid '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || !!domain == !!socket_path ||
	    (uri && !domain)) {
		fprintf(stderr, "idlevm: helper needs one action and either --domain or --socket\n");
		usage(stderr);
		return 2;
	}
	action = argv[optind];
	if (!strcmp(action, "maps") != !!pid) {
		fprintf(stderr, "idlevm: --pid goes with maps, and maps needs it\n");
		return 2;
	}
	if (strcmp(action, "hello") && strcmp(action, "ping") &&
	    strcmp(action, "maps")) {
		fprintf(stderr, "idlevm: unknown helper action '%s'\n", action);
		usage(stderr);
		return 2;
	}

	if (domain) {
		err = domain_socket(uri, domain, &path);
		if (err)
			return ivm_error_report(err);
		socket_path = path;
	}
	err = ivm_helper_connect_path(socket_path, &helper);
	if (err) {
		free(path);
		return ivm_error_report(err);
	}
	ivm_helper_set_timeout(helper, (int)timeout_ms);
	if (!strcmp(action, "hello"))
		r = do_hello(helper, socket_path);
	else if (!strcmp(action, "ping"))
		r = do_ping(helper, count);
	else if ((err = ivm_helper_maps(helper, (int)pid, print_map, NULL)))
		r = ivm_error_report(ivm_error_wrap(err, "maps of pid %ld",
						    pid));
	else
		r = 0;
	if (ivm_helper_skipped_bytes(helper))
		fprintf(stderr, "idlevm: warning: skipped %llu bytes of garbage from the helper\n",
			(unsigned long long)ivm_helper_skipped_bytes(helper));
	ivm_helper_destroy(helper);
	free(path);
	return r;
}
