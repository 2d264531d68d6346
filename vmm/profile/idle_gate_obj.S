/* SPDX-License-Identifier: MIT */
/*
 * The idle gate's BPF object (idle_gate.bpf.c built for the BPF target),
 * carried in idlevm's read-only data for bpf_object__open_mem(): idlevm
 * runs from anywhere, with no file beside it to find.
 */
	.section .rodata
	.balign 8
	.global ivm_idle_gate_bpf
	.type ivm_idle_gate_bpf, @object
ivm_idle_gate_bpf:
	.incbin IVM_IDLE_GATE_OBJ
	.global ivm_idle_gate_bpf_end
ivm_idle_gate_bpf_end:
	.section .note.GNU-stack, "", @progbits
