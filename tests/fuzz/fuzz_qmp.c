// SPDX-License-Identifier: MIT
/*
 * Fuzz the QMP client's socket transport: the input is everything "QEMU"
 * sends on the monitor socket (greeting, replies, events), fed through a
 * socketpair whose far end is then closed, while the client connects and
 * issues the commands idlevm uses (the client's ids are 1, 2, 3...).
 * Seeds are real QEMU 7.2 exchanges (tests/unit/transcripts/).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "access/qemu_discovery.h"
#include "access/qmp.h"

/* What one socketpair buffers without a reader, with room to spare. */
#define MAX_INPUT (96 * 1024)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ivm_qemu_registers *regs = NULL;
	struct ivm_qemu_vcpus *vcpus = NULL;
	struct ivm_qmp_event *event;
	struct ivm_qmp *qmp = NULL;
	struct ivm_error *err;
	enum ivm_qmp_lifecycle state;
	int sv[2], sndbuf = 4 << 20;
	char *text = NULL;
	int i;

	if (size > MAX_INPUT)
		return 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return 0;
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	if (size && send(sv[0], data, size, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		close(sv[0]);
		close(sv[1]);
		return 0;
	}
	/* EOF after the input: the client never waits for a timeout. */
	shutdown(sv[0], SHUT_WR);

	err = ivm_qmp_connect_fd(sv[1], "fuzz", 1000, &qmp);
	if (err) {
		ivm_error_destroy(err);
		close(sv[0]);
		return 0;
	}
	ivm_qmp_set_max_reply(qmp, 16384);
	ivm_error_destroy(ivm_qmp_query_status(qmp, &state));
	err = ivm_qemu_registers_all(qmp, &regs);
	if (!err)
		free(regs);
	ivm_error_destroy(err);
	err = ivm_qemu_vcpus(qmp, &vcpus);
	if (!err)
		free(vcpus);
	ivm_error_destroy(err);
	err = ivm_qmp_hmp(qmp, "info mtree -f", &text);
	if (!err)
		free(text);
	ivm_error_destroy(err);
	(void)ivm_qmp_lifecycle(qmp);
	for (i = 0; i < 4096; i++) {
		err = ivm_qmp_next_event(qmp, &event);
		ivm_error_destroy(err);
		if (err || !event)
			break;
		ivm_qmp_event_destroy(event);
	}
	ivm_qmp_destroy(qmp);
	close(sv[0]);
	return 0;
}
