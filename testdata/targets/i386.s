# i386: a 32-bit x86 program (static, no libc), for stacktop's refusal of
# 32-bit targets. Prints "ready" and sleeps in nanosleep(2) forever, through
# the i386 system call gate (int $0x80). Built by scripts/build-targets.sh
# with the host's binutils alone (as --32, ld -m elf_i386): no multilib C
# library needed.
	.section .rodata
ready:	.ascii "ready\n"
	.data
	.align 4
ts:	.long 1, 0		# struct timespec: 1 s

	.text
	.globl _start
_start:
	movl $4, %eax		# write(1, ready, 6)
	movl $1, %ebx
	movl $ready, %ecx
	movl $6, %edx
	int $0x80
sleep_loop:
	movl $162, %eax		# nanosleep(&ts, NULL)
	movl $ts, %ebx
	xorl %ecx, %ecx
	int $0x80
	jmp sleep_loop
