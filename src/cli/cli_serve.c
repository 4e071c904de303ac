/* `tps serve`: argument parsing and wiring only. Blocks SIGTERM/SIGINT in
 * every thread and hands a signalfd to the server, whose event loop drains
 * on the first signal and stops on the second; the server itself is
 * src/server/server.h. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli/cli.h"
#include "server/server.h"

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: tps serve -m MODEL.gguf [options]\n"
        "\n"
        "OpenAI-compatible streaming server (POST /v1/completions, /v1/chat/completions,\n"
        "/tokenize, /detokenize; GET /v1/models, /health, /metrics) over the continuous-\n"
        "batching engine. SIGTERM drains: no new requests, in-flight ones finish (bounded\n"
        "by --drain-timeout), exit 0. See docs/api.md.\n"
        "\n"
        "  -m, --model FILE        GGUF model (required)\n"
        "  --model-id NAME         model id in responses (default: the file name)\n"
        "  --host ADDR             bind address (default 127.0.0.1)\n"
        "  --port N                port (default 8080; 0: any free port)\n"
        "  --api-key KEY           require 'Authorization: Bearer KEY' (or $TPS_API_KEY)\n"
        "  --chat-template NAME    chatml, llama2, llama3, mistral, zephyr, gemma, phi3\n"
        "                          (default: recognised from the model, else chatml)\n"
        "engine:\n"
        "  --max-seqs N            sequences running at once (default 64)\n"
        "  --max-batch-tokens N    token rows per step (default 256)\n"
        "  --prefill-chunk N       prompt rows one sequence gets per step\n"
        "  --kv-mem BYTES          KV pool size, e.g. 512M, 2G (default: room for max-seqs\n"
        "                          full contexts, at most 1 GiB)\n"
        "  --kv-tokens N           KV pool size in positions instead of bytes\n"
        "  --kv-type f16|f32|q8_0  KV element type (default f16; q8_0 halves KV memory and reads)\n"
        "  --kv-block N            positions per KV block (default 16)\n"
        "  --max-queue N           waiting requests before 429 (default 0: unlimited)\n"
        "  --threads N             kernel threads (default: all cores)\n"
        "  --no-repack             keep Q8_0/Q4_0 weights in the file's layout (no repacked\n"
        "                          copy at load: half the memory, slower decode)\n"
        "  --no-prefix-cache       compute every prompt in full (default: reuse the KV blocks\n"
        "                          of a prompt prefix already computed; same tokens either way)\n"
        "  --trace FILE            Chrome trace JSON written at exit\n"
        "limits:\n"
        "  --max-body-bytes N      request body limit, 413 above (default 8M)\n"
        "  --max-header-bytes N    request headers limit (default 16K)\n"
        "  --max-connections N     open connections; more wait to be accepted (default 1024)\n"
        "  --timeout S             a request must arrive within S seconds; idle keep-alive\n"
        "                          connections close after S (default 60)\n"
        "  --max-tokens-cap N      highest max_tokens accepted (default: the context)\n"
        "  --max-prompt-tokens N   longest prompt accepted, 400 above (default: the context)\n"
        "  --max-n N               most choices per request (n), 400 above (default 16)\n"
        "  --drain-timeout S       on SIGTERM, in-flight requests get S seconds (default 30)\n");
}

/* "512M", "2G", "64K", "1000": bytes (binary multiples). */
static int parse_size(const char *v, size_t *out) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || end == v || v[0] == '-') return -1;
    unsigned shift = 0;
    if (*end) {
        switch (*end) {
        case 'k':
        case 'K':
            shift = 10;
            break;
        case 'm':
        case 'M':
            shift = 20;
            break;
        case 'g':
        case 'G':
            shift = 30;
            break;
        case 't':
        case 'T':
            shift = 40;
            break;
        default:
            return -1;
        }
        end++;
        if (*end == 'i') end++;
        if (*end == 'B' || *end == 'b') end++;
        if (*end) return -1;
    }
    if (shift && n > (SIZE_MAX >> shift)) return -1;
    *out = (size_t)(n << shift);
    return 0;
}

static int parse_u32(const char *v, uint32_t *out) {
    char *end;
    errno = 0;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-' || n > UINT32_MAX) return -1;
    *out = (uint32_t)n;
    return 0;
}

int cli_serve(int argc, char **argv) {
    server_config c;
    server_config_default(&c);
    c.api_key = getenv("TPS_API_KEY");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--no-repack")) {
            c.no_repack = true;
            continue;
        }
        if (!strcmp(a, "--no-prefix-cache")) {
            c.engine.no_prefix_cache = true;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "tps serve: %s needs a value (or is unknown; see --help)\n", a);
            return 2;
        }
        i++;
        uint32_t u = 0;
        int bad = 0;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            c.model_path = v;
        else if (!strcmp(a, "--model-id"))
            c.model_id = v;
        else if (!strcmp(a, "--host"))
            c.host = v;
        else if (!strcmp(a, "--port")) {
            bad = parse_u32(v, &u) || u > 65535;
            c.port = (int)u;
        } else if (!strcmp(a, "--api-key"))
            c.api_key = v;
        else if (!strcmp(a, "--chat-template"))
            c.chat_template = v;
        else if (!strcmp(a, "--max-seqs"))
            bad = parse_u32(v, &c.engine.max_seqs);
        else if (!strcmp(a, "--max-batch-tokens"))
            bad = parse_u32(v, &c.engine.max_batch_tokens);
        else if (!strcmp(a, "--prefill-chunk"))
            bad = parse_u32(v, &c.engine.prefill_chunk);
        else if (!strcmp(a, "--kv-mem"))
            bad = parse_size(v, &c.engine.kv_mem);
        else if (!strcmp(a, "--kv-tokens"))
            bad = parse_u32(v, &c.engine.kv_tokens);
        else if (!strcmp(a, "--kv-type")) {
            if (!strcmp(v, "f16"))
                c.engine.kv_type = GGML_TYPE_F16;
            else if (!strcmp(v, "f32"))
                c.engine.kv_type = GGML_TYPE_F32;
            else if (!strcmp(v, "q8_0"))
                c.engine.kv_type = GGML_TYPE_Q8_0;
            else
                bad = 1;
        } else if (!strcmp(a, "--kv-block"))
            bad = parse_u32(v, &c.engine.kv_block);
        else if (!strcmp(a, "--max-queue"))
            bad = parse_u32(v, &c.engine.max_queue);
        else if (!strcmp(a, "--threads")) {
            bad = parse_u32(v, &u) || u > INT_MAX;
            c.engine.n_threads = (int)u;
        } else if (!strcmp(a, "--trace"))
            c.engine.trace_path = v;
        else if (!strcmp(a, "--max-body-bytes"))
            bad = parse_size(v, &c.max_body_bytes);
        else if (!strcmp(a, "--max-header-bytes"))
            bad = parse_size(v, &c.max_header_bytes);
        else if (!strcmp(a, "--max-connections"))
            bad = parse_u32(v, &c.max_connections);
        else if (!strcmp(a, "--timeout"))
            bad = parse_u32(v, &c.timeout_s);
        else if (!strcmp(a, "--max-tokens-cap"))
            bad = parse_u32(v, &c.max_tokens_cap);
        else if (!strcmp(a, "--max-prompt-tokens"))
            bad = parse_u32(v, &c.max_prompt_tokens);
        else if (!strcmp(a, "--max-n"))
            bad = parse_u32(v, &c.max_n) || c.max_n < 1;
        else if (!strcmp(a, "--drain-timeout"))
            bad = parse_u32(v, &c.drain_timeout_s);
        else {
            fprintf(stderr, "tps serve: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "tps serve: %s: '%s' is not a valid value\n", a, v);
            return 2;
        }
    }
    if (!c.model_path) {
        fprintf(stderr, "tps serve: -m MODEL is required\n");
        usage(stderr);
        return 2;
    }

    /* Signals: blocked here, so every thread started later inherits the mask;
     * the server's loop reads them from the signalfd. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    if (pthread_sigmask(SIG_BLOCK, &mask, NULL) ||
        (c.signal_fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        fprintf(stderr, "tps serve: cannot set up signal handling: %s\n", strerror(errno));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN); /* a client gone mid-write is an error return, not a kill */

    server *s = NULL;
    tps_err err = {{0}};
    int rc = server_create(&s, &c, &err);
    if (!rc) rc = server_start(s, &err);
    if (!rc) rc = server_load(s, &err);
    if (rc) {
        fprintf(stderr, "tps serve: %s\n", err.msg);
        server_free(s);
        close(c.signal_fd);
        return 1;
    }
    rc = server_wait(s);
    server_free(s);
    close(c.signal_fd);
    if (rc) {
        fprintf(stderr, "tps serve: the event loop failed\n");
        return 1;
    }
    fprintf(stderr, "tps serve: stopped\n");
    return 0;
}
