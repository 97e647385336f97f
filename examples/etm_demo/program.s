// etm_demo: the program of the example (made by examples/make_examples.py)

// user program (EL0), at 0x400000
_start:
        mov x19, #0             // sum = 0
        mov x20, #3             // i = 3
loop:
        mov x0, x20
        bl square               // x0 = i * i
        add x19, x19, x0        // sum += i * i
        subs x20, x20, #1       // i -= 1
        b.ne loop               // three times round
        mov x0, x19             // write(sum)
        mov x8, #64
        svc #0                  // -> kernel (EL1)
        mov x0, #0              // exit(0)
        mov x8, #93
        svc #0                  // -> kernel, does not return
square:
        mul x0, x0, x0
        ret

// kernel handler (EL1), VBAR_EL1 + 0x400
el0_sync:
        mrs x9, esr_el1         // exception syndrome
        lsr x9, x9, #26         // exception class
        cmp x9, #0x15           // SVC from AArch64?
        b.ne panic
        mov x10, #0x28000000    // STM stimulus ports
        cmp x8, #93
        b.eq sys_exit
        str w0, [x10, #0x10]    // channel 0, G_DTS: data + timestamp
        eret                    // back to EL0
sys_exit:
        str w0, [x10, #0x100]   // channel 1, G_DMTS: + marker
halt:
        b halt                  // park the core
panic:
        b panic
