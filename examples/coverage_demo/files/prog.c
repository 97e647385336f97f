
static volatile int sink;

__attribute__((noinline)) static int f1(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        s += i & 3;
    return s;
}

__attribute__((noinline)) static int f2(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        if (i % 3 == 0)
            s += i;
    return s;
}

__attribute__((noinline)) static void check(int v) {
    if (v > 1000000)
        sink = v;
}

__attribute__((noinline)) int never_called(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        if (i & 1)
            sink = i;
    return s;
}

__attribute__((noinline)) int work(void) {
    int total = 0;
    for (int k = 0; k < 10; k++)
        total += (k & 1) ? f1(100) : f2(50);
    check(total);
    return total;
}

void _start(void) {
    sink = work();
    for (;;)
        __asm__ volatile("nop");
}
