/*
 * ocsd_elements: the reference decoder's element-only figure, for the benchmarks.
 *
 * Decodes a trace capture with OpenCSD's C API (Debian's libopencsd-dev) into
 * generic trace elements and counts them: no packet or element text is made,
 * which is what `cstrace decode --format null` is compared with. The decode
 * tree is built by hand from a spec file that bench_elements.py writes from
 * the snapshot (the C API has no snapshot reader):
 *
 *     trace FILE                      the capture
 *     format frame|fsync|hsync|single  ETB/ETR memory, DSTREAM/TPIU syncs, one source
 *     etmv4 IDR0 IDR1 IDR2 IDR8 IDR9 IDR10 IDR11 IDR12 IDR13 CONFIGR TRACEIDR ARCH PROFILE
 *     etmv3 IDR CTRL CCER TRACEID ARCH PROFILE
 *     ptm   IDR CTRL CCER TRACEID ARCH PROFILE
 *     stm   TCSR FEAT3R DEVID FEAT1R HWEV_MAST
 *     mem   ADDRESS FILE              a memory dump
 *
 * Numbers are C literals (0x...). Prints "elements N" on stdout.
 *
 *     gcc -O2 -o ocsd_elements ocsd_elements.c -lopencsd_c_api -lopencsd
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <opencsd/c_api/opencsd_c_api.h>

static unsigned long long element_count;

static ocsd_datapath_resp_t count_element(const void *context, const ocsd_trc_index_t index,
                                          const uint8_t trace_id,
                                          const ocsd_generic_trace_elem *elem)
{
    (void)context;
    (void)index;
    (void)trace_id;
    (void)elem;
    element_count++;
    return OCSD_RESP_CONT;
}

static unsigned long long num(const char *text)
{
    return strtoull(text, NULL, 0);
}

static int fail(const char *what)
{
    fprintf(stderr, "ocsd_elements: %s\n", what);
    return 2;
}

static int add_decoder(dcd_tree_handle_t tree, char **f, int n)
{
    unsigned char id = 0;
    ocsd_err_t err;
    if (strcmp(f[0], "etmv4") == 0 && n == 14) {
        ocsd_etmv4_cfg c;
        memset(&c, 0, sizeof c);
        c.reg_idr0 = num(f[1]);
        c.reg_idr1 = num(f[2]);
        c.reg_idr2 = num(f[3]);
        c.reg_idr8 = num(f[4]);
        c.reg_idr9 = num(f[5]);
        c.reg_idr10 = num(f[6]);
        c.reg_idr11 = num(f[7]);
        c.reg_idr12 = num(f[8]);
        c.reg_idr13 = num(f[9]);
        c.reg_configr = num(f[10]);
        c.reg_traceidr = num(f[11]);
        c.arch_ver = (ocsd_arch_version_t)num(f[12]);
        c.core_prof = (ocsd_core_profile_t)num(f[13]);
        err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_ETMV4I, OCSD_CREATE_FLG_FULL_DECODER,
                                     &c, &id);
    } else if ((strcmp(f[0], "etmv3") == 0 || strcmp(f[0], "ptm") == 0) && n == 7) {
        /* ocsd_etmv3_cfg and ocsd_ptm_cfg have the same fields. */
        ocsd_etmv3_cfg c3;
        ocsd_ptm_cfg cp;
        memset(&c3, 0, sizeof c3);
        c3.reg_idr = num(f[1]);
        c3.reg_ctrl = num(f[2]);
        c3.reg_ccer = num(f[3]);
        c3.reg_trc_id = num(f[4]);
        c3.arch_ver = (ocsd_arch_version_t)num(f[5]);
        c3.core_prof = (ocsd_core_profile_t)num(f[6]);
        if (f[0][0] == 'e') {
            err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_ETMV3,
                                         OCSD_CREATE_FLG_FULL_DECODER, &c3, &id);
        } else {
            memset(&cp, 0, sizeof cp);
            cp.reg_idr = c3.reg_idr;
            cp.reg_ctrl = c3.reg_ctrl;
            cp.reg_ccer = c3.reg_ccer;
            cp.reg_trc_id = c3.reg_trc_id;
            cp.arch_ver = c3.arch_ver;
            cp.core_prof = c3.core_prof;
            err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_PTM, OCSD_CREATE_FLG_FULL_DECODER,
                                         &cp, &id);
        }
    } else if (strcmp(f[0], "stm") == 0 && n == 6) {
        ocsd_stm_cfg c;
        memset(&c, 0, sizeof c);
        c.reg_tcsr = num(f[1]);
        c.reg_feat3r = num(f[2]);
        c.reg_devid = num(f[3]);
        c.reg_feat1r = num(f[4]);
        c.reg_hwev_mast = num(f[5]);
        c.hw_event = HwEvent_Unknown_Disabled;
        err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_STM, OCSD_CREATE_FLG_FULL_DECODER, &c,
                                     &id);
    } else {
        return fail("bad source line in the spec");
    }
    if (err != OCSD_OK)
        return fail("the library refused a decoder configuration");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return fail("usage: ocsd_elements SPEC");
    FILE *spec = fopen(argv[1], "r");
    if (!spec)
        return fail("cannot open the spec");
    char line[4096], trace_path[4096] = "";
    char *sources[64][16];
    int source_fields[64], nsources = 0;
    char *mems[256][2];
    int nmems = 0;
    ocsd_dcd_tree_src_t src = OCSD_TRC_SRC_FRAME_FORMATTED;
    uint32_t flags = OCSD_DFRMTR_FRAME_MEM_ALIGN;
    while (fgets(line, sizeof line, spec)) {
        char *f[16];
        int n = 0;
        for (char *tok = strtok(line, " \t\n"); tok && n < 16; tok = strtok(NULL, " \t\n"))
            f[n++] = strdup(tok);
        if (n == 0)
            continue;
        if (strcmp(f[0], "trace") == 0 && n == 2) {
            snprintf(trace_path, sizeof trace_path, "%s", f[1]);
        } else if (strcmp(f[0], "format") == 0 && n == 2) {
            if (strcmp(f[1], "single") == 0) {
                src = OCSD_TRC_SRC_SINGLE;
                flags = 0;
            } else if (strcmp(f[1], "fsync") == 0) {
                flags = OCSD_DFRMTR_HAS_FSYNCS;
            } else if (strcmp(f[1], "hsync") == 0) {
                flags = OCSD_DFRMTR_HAS_FSYNCS | OCSD_DFRMTR_HAS_HSYNCS;
            }
        } else if (strcmp(f[0], "mem") == 0 && n == 3 && nmems < 256) {
            mems[nmems][0] = f[1];
            mems[nmems][1] = f[2];
            nmems++;
        } else if (nsources < 64) {
            memcpy(sources[nsources], f, sizeof f);
            source_fields[nsources++] = n;
        }
    }
    fclose(spec);

    FILE *trace = fopen(trace_path, "rb");
    if (!trace)
        return fail("cannot open the trace");
    fseek(trace, 0, SEEK_END);
    long size = ftell(trace);
    fseek(trace, 0, SEEK_SET);
    uint8_t *data = malloc(size > 0 ? (size_t)size : 1);
    if (!data || fread(data, 1, (size_t)size, trace) != (size_t)size)
        return fail("cannot read the trace");
    fclose(trace);

    dcd_tree_handle_t tree = ocsd_create_dcd_tree(src, flags);
    if (tree == C_API_INVALID_TREE_HANDLE)
        return fail("cannot create the decode tree");
    for (int i = 0; i < nsources; i++) {
        int bad = add_decoder(tree, sources[i], source_fields[i]);
        if (bad)
            return bad;
    }
    for (int i = 0; i < nmems; i++) {
        /* Dumps seen by several cores are given once; an overlap is not fatal. */
        ocsd_dt_add_binfile_mem_acc(tree, num(mems[i][0]), OCSD_MEM_SPACE_ANY, mems[i][1]);
    }
    ocsd_dt_set_gen_elem_outfn(tree, count_element, NULL);

    uint32_t pos = 0;
    ocsd_datapath_resp_t resp = OCSD_RESP_CONT;
    while (pos < (uint32_t)size && !OCSD_DATA_RESP_IS_FATAL(resp)) {
        uint32_t done = 0;
        if (OCSD_DATA_RESP_IS_CONT(resp)) {
            resp = ocsd_dt_process_data(tree, OCSD_OP_DATA, pos, (uint32_t)size - pos, data + pos,
                                        &done);
            pos += done;
        } else {
            resp = ocsd_dt_process_data(tree, OCSD_OP_FLUSH, 0, 0, NULL, NULL);
        }
    }
    if (!OCSD_DATA_RESP_IS_FATAL(resp))
        ocsd_dt_process_data(tree, OCSD_OP_EOT, 0, 0, NULL, NULL);
    ocsd_destroy_dcd_tree(tree);
    free(data);
    printf("elements %llu\n", element_count);
    return 0;
}
