/* `tps model make`: argument parsing for the synthetic model maker
 * (src/model/model_make). */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/file_read.h"
#include "cli/cli.h"
#include "cli/opt.h"
#include "kernels/quant.h"
#include "model/gguf.h"
#include "model/model_make.h"
#include "model/quant_mix.h"

typedef struct make_cli {
    model_make_opts o;
    const char *preset, *type, *arch, *chat_template_file;
    uint32_t layers; /* 0: the preset's */
    bool pure;
} make_cli;

static const opt_row make_rows[] = {
    {"--arch", .kind = OPT_STR, .off = offsetof(make_cli, arch), .metavar = "A",
     .help = "architecture (below; default llama)"},
    {"--preset", .kind = OPT_STR, .off = offsetof(make_cli, preset), .metavar = "P",
     .help = "shape (below)"},
    {"--layers", .kind = OPT_U32, .off = offsetof(make_cli, layers), .min = 1, .max = 1024,
     .metavar = "N",
     .help = "the preset's shape with N layers instead of its own (a real\n"
             "shape too big for this machine's disk or memory, cut to a\n"
             "few of its layers: its per-layer cost and numerics)"},
    {"--type", .kind = OPT_STR, .off = offsetof(make_cli, type), .metavar = "T",
     .help = "one of llama.cpp's file types (below): each matrix in the\n"
             "type llama-quantize gives it, e.g. q4_k_m is Q4_K with Q6_K\n"
             "for output.weight and some attn_v / ffn_down, and rows that\n"
             "are not whole blocks fall back (Q4_K -> Q5_0, ...); or a\n"
             "block type (q4_k, q5_k, ...) for every matrix"},
    {"--pure", .kind = OPT_FLAG, .off = offsetof(make_cli, pure),
     .help = "every matrix in the type T names, no mix (llama-quantize\n"
             "--pure): q4_0 is then Q4_0 for output.weight too"},
    {"--vocab", .kind = OPT_STR, .off = offsetof(make_cli, o.vocab_path), .metavar = "FILE",
     .help = "copy the tokenizer of this GGUF (else a byte-level vocabulary\n"
             "padded to the preset's size: one token per byte of text)"},
    {"--chat-template-file", .kind = OPT_STR, .off = offsetof(make_cli, chat_template_file),
     .metavar = "FILE",
     .help = "write this Jinja text as tokenizer.chat_template (e.g. a\n"
             "DeepSeek-R1-Distill template on a llama or qwen2 file)"},
    {"--seed", .kind = OPT_U64, .off = offsetof(make_cli, o.seed), .max = 18446744073709551615.0,
     .metavar = "S", .help = "weight seed (default 1); same seed, same file"},
    {"--output", "-o", OPT_STR, offsetof(make_cli, o.out_path), .metavar = "F",
     .help = "output path"},
    {0},
};

/* A whole text file (at most 16 MiB), NUL-terminated; NULL on failure. */
static char *read_text(const char *path) {
    char *text;
    return tps_read_file(path, 16u << 20, &text, NULL) ? NULL : text;
}

static void presets(FILE *out) {
    fprintf(out, "\nfile types (llama.cpp's, no importance matrix; bits per weight vary):\n ");
    for (const quant_ftype *f = quant_ftypes; f->name; f++)
        fprintf(out, " %s", f->name);
    fprintf(out, "\nblock types for every matrix: %s\n", kernel_supported_names());
    fprintf(out, "\narchitectures:\n");
    for (const model_arch_spec *a = model_arch_specs; a->name; a++)
        fprintf(out, "  %-8s %s\n", a->name, a->about);
    fprintf(out, "\npresets:\n");
    for (const model_preset *p = model_presets; p->name; p++) {
        uint64_t active;
        const uint64_t total = model_preset_params_active(p, &active);
        const model_moe_shape *moe = model_preset_moe(p);
        if (!moe) {
            fprintf(out,
                    "  %-5s dim %u, %u layers, %u heads (%u kv), ffn %u, vocab %u, ctx %u: %.0fM "
                    "params, like %s\n",
                    p->name, p->dim, p->n_layers, p->n_heads, p->n_kv_heads, p->ffn_dim, p->n_vocab,
                    p->ctx_len, (double)total / 1e6, p->like);
            continue;
        }
        fprintf(out,
                "  %s (--arch %s) dim %u, %u layers, %u heads (%u kv), %u experts (%u a token) "
                "of ffn %u, vocab %u, ctx %u: %.0fM params, %.0fM active, like %s\n",
                p->name, moe->arch, p->dim, p->n_layers, p->n_heads, p->n_kv_heads, moe->n_expert,
                moe->n_expert_used, moe->expert_ffn, p->n_vocab, p->ctx_len, (double)total / 1e6,
                (double)active / 1e6, p->like);
    }
    fprintf(out, "  (a mixture-of-experts --arch with a dense preset: the arch's experts, each\n"
                 "   of the preset's ffn)\n");
}

static const opt_cmd make_cmd = {
    .prog = "tps model make",
    .usage =
        "usage: tps model make [--arch A] --preset P --type T [--pure] [--vocab FILE.gguf]\n"
        "                      [--chat-template-file FILE] [--seed S] -o OUT.gguf\n"
        "\n"
        "Writes a GGUF of a real model's shape and a supported architecture with seeded random\n"
        "weights: the same compute cost per token as a trained model of that shape\n"
        "(what a throughput benchmark measures); its text is noise. llama.cpp loads it.\n"
        "\n",
    .rows = make_rows,
    .epilogue = presets,
};

int cli_model_make(int argc, char **argv) {
    make_cli m = {.o = {.seed = 1, .progress = 1}};
    int prc = opt_main(&make_cmd, &m, argc, argv);
    if (prc >= 0) return prc;
    model_make_opts o = m.o;
    const char *preset = m.preset, *type = m.type;
    if (!preset || !type || !o.out_path) {
        fprintf(stderr, "tps model make: --preset, --type and -o are required (see --help)\n");
        return 2;
    }
    o.preset = model_preset_find(preset);
    if (!o.preset) {
        fprintf(stderr, "tps model make: unknown preset '%s' (see --help)\n", preset);
        return 2;
    }
    model_preset cut;
    if (m.layers) {
        cut = *o.preset;
        cut.n_layers = m.layers;
        o.preset = &cut;
    }
    /* a mixture-of-experts shape names its architecture */
    const model_moe_shape *moe = model_preset_moe(o.preset);
    o.arch = model_arch_find(m.arch ? m.arch : moe ? moe->arch : "llama");
    if (!o.arch) {
        fprintf(stderr, "tps model make: unknown architecture '%s' (see --help)\n", m.arch);
        return 2;
    }
    const quant_ftype *ft = m.pure ? NULL : quant_ftype_find(type);
    const int t = ggml_type_from_name(type);
    if (ft) {
        o.type = MODEL_MAKE_FTYPE(ft->ftype);
    } else if (t >= 0 && kernel_type_supported((uint32_t)t)) {
        o.type = (uint32_t)t;
    } else {
        fprintf(stderr,
                "tps model make: --type '%s' is neither one of llama.cpp's file types nor a "
                "block type tps writes%s (see --help)\n",
                type, m.pure ? " (--pure takes a block type)" : "");
        return 2;
    }
    char *tmpl = NULL;
    if (m.chat_template_file && !(tmpl = read_text(m.chat_template_file))) {
        fprintf(stderr, "tps model make: --chat-template-file %s: cannot read it\n",
                m.chat_template_file);
        return 1;
    }
    o.chat_template = tmpl;
    tps_err err = {0};
    int rc = model_make(&o, &err);
    free(tmpl);
    if (rc != 0) {
        fprintf(stderr, "tps model make: %s\n", err.msg);
        return 1;
    }
    fprintf(stderr, "model make: wrote %s (%s, %s, %u layers, %s%s, seed %llu)\n", o.out_path,
            o.arch->name, o.preset->name, o.preset->n_layers,
            ft ? ft->name : ggml_type_get(o.type)->name, ft ? "" : " pure",
            (unsigned long long)o.seed);
    return 0;
}
