// SPDX-License-Identifier: MIT
/* The fake QEMU of test_qmp_fake.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "test_qmp_fake.h"

#define TRANSCRIPTS "tests/unit/transcripts/"

static struct json_object *load(const char *name)
{
	char path[256];
	struct json_object *t, *exchange;

	snprintf(path, sizeof(path), TRANSCRIPTS "%s", name);
	t = json_object_from_file(path);
	cr_assert(t, "cannot load %s (run from the repository root)", path);
	cr_assert(json_object_object_get_ex(t, "exchange", &exchange));
	return t;
}

void fake_init(struct fake_qemu *fake, const char *name, int *client_fd)
{
	int sv[2];

	memset(fake, 0, sizeof(*fake));
	fake->transcript = load(name);
	json_object_object_get_ex(fake->transcript, "exchange",
				  &fake->exchange);
	fake->used = calloc(json_object_array_length(fake->exchange), 1);
	cr_assert(fake->used);
	cr_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
	cr_assert(pipe2(fake->hold_pipe, O_CLOEXEC) == 0);
	fake->fd = sv[0];
	*client_fd = sv[1];
}

static void write_all(int fd, const char *p, size_t len)
{
	while (len) {
		ssize_t r = send(fd, p, len, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return;
		p += r;
		len -= (size_t)r;
	}
}

static const char *entry_str(struct json_object *entry, const char *key)
{
	struct json_object *v;

	if (!json_object_object_get_ex(entry, key, &v))
		return NULL;
	return json_object_get_string(v);
}

/* Send a recorded line with the recorder's id replaced by the client's. */
static void send_recorded(struct fake_qemu *fake, const char *line,
			  struct json_object *client_id, bool half)
{
	const char *id = strstr(line, "\"id\": \"rec-");
	char *out;
	size_t len;

	if (id && client_id) {
		const char *after = strchr(id + 11, '"') + 1;
		FILE *f;

		f = open_memstream(&out, &len);
		fwrite(line, 1, (size_t)(id - line), f);
		fprintf(f, "\"id\": %s",
			json_object_to_json_string_ext(client_id,
						       JSON_C_TO_STRING_PLAIN));
		fputs(after, f);
		fclose(f);
	} else {
		out = strdup(line);
		len = strlen(out);
	}
	write_all(fake->fd, out, half ? len / 2 : len);
	free(out);
}

static bool fault_matches(struct fake_qemu *fake, struct json_object *cmd)
{
	struct json_object *args, *line;
	const char *execute = entry_str(cmd, "execute");

	if (!fake->fault || !fake->fault_cmd || !execute)
		return false;
	if (!strcmp(execute, fake->fault_cmd))
		return true;
	return json_object_object_get_ex(cmd, "arguments", &args) &&
	       json_object_object_get_ex(args, "command-line", &line) &&
	       !strcmp(json_object_get_string(line), fake->fault_cmd);
}

/* Index of the unused recorded "send" equal to cmd (without id), or -1. */
static int find_send(struct fake_qemu *fake, struct json_object *cmd)
{
	size_t i, n = json_object_array_length(fake->exchange);
	struct json_object *bare, *v;
	int found = -1;

	bare = json_object_new_object();
	json_object_object_foreach(cmd, key, val) {
		if (strcmp(key, "id"))
			json_object_object_add(bare, key, json_object_get(val));
	}
	for (i = 0; i < n && found < 0; i++) {
		struct json_object *entry =
			json_object_array_get_idx(fake->exchange, i);

		if (!fake->used[i] &&
		    json_object_object_get_ex(entry, "send", &v) &&
		    json_object_equal(v, bare)) {
			fake->used[i] = true;
			found = (int)i;
		}
	}
	json_object_put(bare);
	return found;
}

static void *fake_main(void *arg)
{
	struct fake_qemu *fake = arg;
	size_t n = json_object_array_length(fake->exchange);
	char buf[65536];
	size_t len = 0;
	bool closed = false;

	if (fake->greeting)
		write_all(fake->fd, fake->greeting, strlen(fake->greeting));
	else if (!fake->no_greeting)
		send_recorded(fake, entry_str(json_object_array_get_idx(
						      fake->exchange, 0), "recv"),
			      NULL, false);
	while (!closed) {
		char *nl = memchr(buf, '\n', len);
		struct json_object *cmd, *id = NULL;
		ssize_t r;
		int at;

		if (!nl) {
			if (len == sizeof(buf))
				break;
			r = recv(fake->fd, buf + len, sizeof(buf) - len, 0);
			if (r <= 0)
				break;
			len += (size_t)r;
			continue;
		}
		*nl = '\0';
		cmd = json_tokener_parse(buf);
		memmove(buf, nl + 1, len - (size_t)(nl + 1 - buf));
		len -= (size_t)(nl + 1 - buf);
		if (!cmd)
			continue;
		fake->commands++;
		json_object_object_get_ex(cmd, "id", &id);
		if (fault_matches(fake, cmd)) {
			switch (fake->fault) {
			case FAKE_FAULT_SILENT:
				json_object_put(cmd);
				continue;
			case FAKE_FAULT_RAW:
				write_all(fake->fd, fake->raw, fake->raw_len);
				if (fake->raw_then_reply)
					break;
				json_object_put(cmd);
				continue;
			case FAKE_FAULT_HOLD: {
				char c;

				/* Not a delay: the test decides when. */
				(void)!read(fake->hold_pipe[0], &c, 1);
				break;
			}
			case FAKE_FAULT_DELAY: {
				struct timespec ts = {
					fake->delay_ms / 1000,
					(fake->delay_ms % 1000) * 1000000L,
				};

				nanosleep(&ts, NULL);
				break;
			}
			default:
				break;
			}
		}
		at = find_send(fake, cmd);
		if (at < 0) {
			const char *e = "{\"error\": {\"class\": \"GenericError\", \"desc\": \"fake qemu: command not in the transcript\"}}\r\n";

			fake->unexpected++;
			write_all(fake->fd, e, strlen(e));
			json_object_put(cmd);
			continue;
		}
		for (size_t i = (size_t)at + 1; i < n; i++) {
			struct json_object *entry =
				json_object_array_get_idx(fake->exchange, i);
			const char *line = entry_str(entry, "recv");

			if (json_object_object_get_ex(entry, "eof", NULL)) {
				closed = true;
				break;
			}
			if (!line)
				break;
			if (fault_matches(fake, cmd) &&
			    fake->fault == FAKE_FAULT_CLOSE_MID &&
			    strstr(line, "\"id\": \"rec-")) {
				send_recorded(fake, line, id, true);
				closed = true;
				break;
			}
			send_recorded(fake, line, id, false);
		}
		json_object_put(cmd);
	}
	shutdown(fake->fd, SHUT_RDWR);
	return NULL;
}

void fake_start(struct fake_qemu *fake)
{
	cr_assert(pthread_create(&fake->thread, NULL, fake_main, fake) == 0);
}

void fake_release(struct fake_qemu *fake)
{
	(void)!write(fake->hold_pipe[1], "x", 1);
}

void fake_join(struct fake_qemu *fake)
{
	fake_release(fake);
	pthread_join(fake->thread, NULL);
	close(fake->hold_pipe[0]);
	close(fake->hold_pipe[1]);
	close(fake->fd);
	free(fake->used);
	json_object_put(fake->transcript);
}

char *fake_recorded_hmp(const char *name, const char *cmdline, int cpu_index)
{
	struct json_object *t = load(name), *exchange, *send, *args, *v;
	char *text = NULL;
	size_t i, n;

	json_object_object_get_ex(t, "exchange", &exchange);
	n = json_object_array_length(exchange);
	for (i = 0; i + 1 < n && !text; i++) {
		struct json_object *entry = json_object_array_get_idx(exchange, i);
		const char *line;
		struct json_object *reply;

		if (!json_object_object_get_ex(entry, "send", &send) ||
		    !json_object_object_get_ex(send, "arguments", &args) ||
		    !json_object_object_get_ex(args, "command-line", &v) ||
		    strcmp(json_object_get_string(v), cmdline))
			continue;
		if (json_object_object_get_ex(args, "cpu-index", &v) !=
			    (cpu_index >= 0) ||
		    (cpu_index >= 0 && json_object_get_int(v) != cpu_index))
			continue;
		for (i++; i < n && !text; i++) {
			entry = json_object_array_get_idx(exchange, i);
			line = entry_str(entry, "recv");
			cr_assert(line);
			reply = json_tokener_parse(line);
			if (json_object_object_get_ex(reply, "return", &v))
				text = strdup(json_object_get_string(v));
			json_object_put(reply);
		}
	}
	json_object_put(t);
	cr_assert(text, "%s: no recorded '%s'", name, cmdline);
	return text;
}
