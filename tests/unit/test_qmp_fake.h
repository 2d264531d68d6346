/* SPDX-License-Identifier: MIT */
/*
 * A fake QEMU for unit tests: a thread serving one end of a socketpair with
 * the bytes of a transcript recorded from a real QEMU 7.2
 * (the JSON files in tests/unit/transcripts, see record.py there).
 *
 * It sends the recorded greeting, then answers each command the client
 * sends with the recorded messages that followed the same command (same
 * "execute" and "arguments") in the transcript: events and the reply,
 * byte for byte except the reply's "id", which becomes the client's.  So the
 * client may issue the recorded commands in any order.  A command absent
 * from the transcript is counted in `unexpected` and answered with an error.
 * Faults can be injected for one command (matched by execute name, or by
 * HMP command line).
 */
#ifndef IVM_TEST_QMP_FAKE_H
#define IVM_TEST_QMP_FAKE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

enum fake_fault {
	FAKE_FAULT_NONE,
	FAKE_FAULT_SILENT,	/* never answer that command */
	FAKE_FAULT_DELAY,	/* answer it after delay_ms */
	FAKE_FAULT_HOLD,	/* answer it once fake_release() is called */
	FAKE_FAULT_RAW,		/* send raw bytes instead of the reply */
	FAKE_FAULT_CLOSE_MID,	/* send half of the reply, then close */
};

struct fake_qemu {
	int fd;				/* the fake's end */
	struct json_object *transcript;	/* "exchange" array owner */
	struct json_object *exchange;
	bool *used;
	/* Instead of the recorded greeting: raw bytes, or silence. */
	const char *greeting;
	bool no_greeting;
	enum fake_fault fault;
	const char *fault_cmd;		/* execute name or HMP command line */
	const char *raw;
	size_t raw_len;
	bool raw_then_reply;		/* RAW: the recorded reply follows */
	int hold_pipe[2];		/* FAKE_FAULT_HOLD waits on [0] */
	int delay_ms;
	pthread_t thread;
	int commands;			/* commands received */
	int unexpected;			/* commands not in the transcript */
};

/*
 * Load tests/unit/transcripts/<name> and create a socketpair; *client_fd
 * is the end for ivm_qmp_connect_fd().  Set faults, then fake_start().
 */
void fake_init(struct fake_qemu *fake, const char *name, int *client_fd);
void fake_start(struct fake_qemu *fake);
/* Let a FAKE_FAULT_HOLD reply go (fake_join does it too). */
void fake_release(struct fake_qemu *fake);
/* Wait for the fake to finish (the client must have closed its end). */
void fake_join(struct fake_qemu *fake);

/* The text of the recorded reply ("return" string) to an HMP command. */
char *fake_recorded_hmp(const char *name, const char *cmdline, int cpu_index);

#endif /* IVM_TEST_QMP_FAKE_H */
