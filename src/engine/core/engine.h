/* The serving engine: a thread that runs Orca-style iteration-level
 * scheduling over a paged KV cache, and the request API the server (and
 * `tps generate`, and tests) talk to.
 *
 * Submit and cancel are thread-safe and never wait on a step. The engine
 * delivers events (TOKEN, DONE) for all requests into one queue that one
 * consumer drains; an eventfd becomes readable whenever the queue is
 * non-empty, so an event loop can wait on it. Every event carries the
 * monotonic time at which the step that produced it ended.
 *
 * Not here: HTTP, JSON, chat templates (server), tokenizing prompts (callers
 * pass token ids), the forward maths (forward.c), sampling maths (sampler.c). */
#ifndef TPS_ENGINE_H
#define TPS_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine/cost/engine_shape.h" /* engine_macs, the K/V bytes a row reads */
#include "engine/cost/step_cost.h"    /* ENGINE_ITL_TARGET_FLOOR_MS */
#include "engine/cost/step_fit.h"
#include "engine/sample/logprobs.h"
#include "engine/schedule/request.h" /* engine_request, engine_finish, engine_timings */
#include "metrics/hist.h"
#include "model/llama_model.h"
#include "model/tokenizer.h"
#include "base/error.h"

typedef struct engine engine;

/* One step as the planner sized it and as it ran (monotonic ns). */
typedef struct engine_step_obs {
    uint32_t rows, logit_rows, prefill_rows, decode_rows, seqs;
    double attended;     /* positions attended, summed over rows */
    double kv_positions; /* K/V positions read: each sequence's context once */
    uint64_t t0;         /* the step began (its plan was made) */
    uint64_t t1;         /* its forward pass ended: its tokens are stamped t1 */
    uint64_t t2;         /* its tokens were sampled and its events published */
} engine_step_obs;

typedef struct engine_params {
    const llama_model *model;  /* borrowed; outlives the engine */
    const tokenizer *tok;      /* borrowed; outlives the engine */
    int n_threads;             /* kernel threads; 0: all cores */
    uint32_t max_seqs;         /* sequences running at once (default 64) */
    uint32_t max_batch_tokens; /* token rows per step (default 256) */
    uint32_t
        prefill_chunk;  /* most prompt rows one sequence gets per step (default max_batch_tokens) */
    uint32_t kv_block;  /* positions per KV block (default 16) */
    size_t kv_mem;      /* KV pool bytes; 0: from kv_tokens */
    uint32_t kv_tokens; /* KV pool positions when kv_mem is 0; 0: max_seqs * context */
    uint32_t kv_type;   /* GGML_TYPE_F16 (default), GGML_TYPE_F32 or GGML_TYPE_Q8_0 */
    uint32_t max_queue; /* waiting requests before submit says TPS_EFULL; 0: unlimited */
    const char *trace_path; /* Chrome trace JSON written at engine_destroy; NULL: none */
    /* Automatic prefix caching (on unless set): full KV blocks stay
     * indexed by their token chain after their sequence ends, and a new
     * request takes every leading block already computed instead of
     * prefilling it again. Output is bit-identical either way. */
    bool no_prefix_cache;
    /* Fault in the whole KV pool while idle and let the prefix cache keep
     * blocks in all of it (resident memory: the whole pool). Unset, the
     * pool faults in ENGINE_KV_RESIDENT_MIN bytes or an eighth of itself,
     * whichever is more, and grows past that only when the sequences
     * running need it; the cache keeps what fits in that. */
    bool kv_prefault;
    /* Inter-token-latency target for a step that carries decode rows, in
     * ms: prompt chunks are cut so the step's predicted time (step_cost.h)
     * stays within it; decode rows are never cut, and such a step still
     * gives prompts a row for each sequence in play, decoding or waiting
     * for its first token (at least 4, at most 16). 0: off (chunks bounded by
     * max_batch_tokens and prefill_chunk only). ENGINE_ITL_TARGET_AUTO:
     * measured at start, 3 x a one-row step, at least 5 ms. */
    double itl_target_ms;
    /* Called on the engine thread after every step that ran rows (NULL:
     * none), with what it ran and when: tps plan calibrate and tps serve
     * --save-calibration fit a step-cost model on them (step_fit.h). It
     * must be quick and must not call into the engine. */
    void (*on_step)(void *arg, const engine_step_obs *obs);
    void *on_step_arg;
} engine_params;

/* The automatic ITL target; its floor is ENGINE_ITL_TARGET_FLOOR_MS (step_cost.h). */
#define ENGINE_ITL_TARGET_AUTO (-1.0)
#define ENGINE_KV_RESIDENT_MIN (64u << 20)

void engine_params_default(engine_params *p);

typedef enum engine_event_kind { ENGINE_EV_TOKEN = 1, ENGINE_EV_DONE = 2 } engine_event_kind;

#define ENGINE_TEXT_MAX 1024

typedef struct engine_event {
    engine_event_kind kind;
    uint64_t id;     /* the handle engine_submit returned */
    uint32_t choice; /* 0 .. n-1: which of the request's choices */
    void *user;
    uint64_t t_ns;
    /* TOKEN: the id, and the text that became final with it: valid UTF-8,
     * possibly empty (bytes of a split character or of a possible stop string
     * are held back and come with a later event). */
    int32_t token;
    uint32_t text_len;
    char text[ENGINE_TEXT_MAX];
    /* TOKEN of a request with logprobs: the token's log-probability, and
     * n_top alternatives, most likely first. */
    float logprob;
    uint32_t n_top;
    int32_t top_id[LOGPROBS_MAX_TOP];
    float top_logprob[LOGPROBS_MAX_TOP];
    /* DONE: why, and the choice's timings. Any held text comes in `text`.
     * A request of n choices gets n DONE events, one per choice. */
    engine_finish finish;
    int32_t stop_string; /* DONE: which of the request's stop strings ended it, -1 none */
    engine_timings timings;
    char error[256];
} engine_event;

int engine_create(engine **out, const engine_params *p, tps_err *err);
/* Stops the thread; requests still running finish as CANCELLED (their DONE
 * events are queued, then dropped with the engine). */
void engine_destroy(engine *e);

/* Queues a request; *id gets its handle. Rejects at once (nothing queued)
 * with a message naming both numbers when the prompt is empty, longer than
 * the context, prompt + max_tokens exceeds the context or could never fit in
 * the KV pool (for n choices: the shared prompt blocks plus n times the rest)
 * (TPS_ERANGE), a token id is outside the vocabulary, the sampling
 * parameters are invalid or n exceeds max_seqs (TPS_EINVAL), or the queue
 * is full (TPS_EFULL). Thread-safe; never waits on a step. */
int engine_submit(engine *e, const engine_request *r, uint64_t *id, tps_err *err);
/* Builds what constrained requests need from the vocabulary (its trie),
 * once; later calls return at once. Thread-safe. Submit does it when
 * needed; a caller that must not spend the time on its own thread (the
 * HTTP loop) calls this elsewhere first. */
int engine_constraints_prepare(engine *e, tps_err *err);
/* The request (every choice of it) leaves at the next step; its blocks are
 * free by the end of that step (blocks other requests share stay theirs); a
 * DONE(cancelled) event follows for each unfinished choice. Unknown or
 * finished ids are ignored. Thread-safe. */
void engine_cancel(engine *e, uint64_t id);

/* Empties the prefix cache before the next step (vLLM's reset_prefix_cache):
 * a request submitted after this returns finds nothing cached; requests
 * running keep their K/V, which are not cached again. False when the
 * engine has no prefix cache. Thread-safe; never waits on a step. */
bool engine_reset_prefix_cache(engine *e);

/* Moves up to max queued events into out; returns how many. Non-blocking. */
size_t engine_poll(engine *e, engine_event *out, size_t max);
/* Waits until an event is queued or timeout_ms passes (-1: forever). */
void engine_wait(engine *e, int timeout_ms);
/* Readable while events are queued (level-triggered via eventfd). */
int engine_event_fd(const engine *e);

/* Counters and gauges for /metrics and tests; a consistent snapshot. */
typedef struct engine_stats {
    uint64_t steps_total;
    uint64_t prompt_tokens_total; /* prompt tokens of requests, counted at their first token */
    uint64_t prefill_rows_total; /* prompt rows computed, recomputation after preemption included */
    uint64_t generation_tokens_total; /* tokens sampled and delivered */
    uint64_t requests_total[4];       /* by engine_finish */
    uint64_t preemptions_total;
    uint32_t requests_running;
    uint32_t requests_waiting;
    uint32_t kv_blocks_total;
    uint32_t kv_blocks_resident; /* faulted in while idle (prefix cache on); the rest on demand */
    uint32_t kv_blocks_used;
    uint32_t kv_block_tokens;
    /* The sliding-window layers' own pool (0 without such layers): its
     * blocks, and those sequences hold (each at most its window's). */
    uint32_t kv_local_blocks_total;
    uint32_t kv_local_blocks_used;
    /* A hybrid model's recurrent-state pool (0 without linear layers): its
     * slots, those sequences hold (one each), and one slot's bytes. */
    uint32_t state_slots_total;
    uint32_t state_slots_used;
    uint64_t state_slot_bytes;
    /* its prefix-cache checkpoints: how many are kept at most, every how
     * many positions (0: none) */
    uint32_t state_ckpts_total;
    uint32_t state_ckpt_every;
    uint32_t n_ctx;
    /* Prefix cache, in tokens as vLLM counts them: prompt tokens looked up
     * at admission, and those found. Blocks whose contents are indexed
     * (in use or free but kept). */
    uint64_t prefix_cache_queries_total;
    uint64_t prefix_cache_hits_total;
    uint32_t kv_blocks_cached;
    /* The KV pool is faulted in: with the prefix cache the engine does that
     * while idle, a slice at a time, so that requests do not pay the first
     * touch of blocks the cache hands out cold; without it, soon true. */
    bool kv_pool_warm;
    /* The ITL target in force (0: none), the steps carrying decode rows
     * that took longer, and the step-time model now: a step of w rows
     * (attention counted as rows) is predicted to take fixed + w * row. */
    uint64_t itl_target_ns;
    uint64_t steps_over_itl_target_total;
    uint64_t step_cost_fixed_ns, step_cost_row_ns;
    /* The warm-up that primed it (tn_ns 0: not timed, as without an ITL
     * target). */
    step_prime warmup;
    /* Roofline inputs, summed over steps: time in steps, weight bytes read
     * (every matrix once a step: the batch shares the stream), KV bytes read
     * (each sequence's context once a step), multiply-adds (every row
     * through the layers, the LM head on the rows that sample, attention). metrics/roofline.h turns
     * them into GB/s and a fraction of the machine's limit. */
    double step_seconds_total;
    double weight_bytes_read_total, kv_bytes_read_total, macs_total;
    /* Mixture of experts: experts the steps ran, summed over steps and
     * layers (a step runs each expert its rows chose once a layer), and the
     * model's experts a layer and layers; 0 for a dense model. Weight bytes
     * above count only the experts run. */
    uint64_t experts_run_total;
    uint32_t model_experts, model_layers;
} engine_stats;

void engine_get_stats(engine *e, engine_stats *out);
/* Config of the tokens-per-step histogram (counts up to 2^20, 2 digits). */
#define ENGINE_HIST_STEP_TOKENS ((hist_config){.lowest = 0, .highest = 1u << 20, .sig_digits = 2})

/* Merges the engine's step histograms into caller-owned ones created with
 * HIST_CONFIG_LATENCY_NS (step duration, ns) and ENGINE_HIST_STEP_TOKENS
 * (token rows per step); either may be NULL. */
int engine_merge_step_hists(engine *e, hist *step_ns, hist *step_tokens, tps_err *err);
/* Configuration actually in force (defaults resolved). */
const engine_params *engine_get_params(const engine *e);
/* The numbers the admission rule (engine/cost/admit.h) weighs a request
 * against: what engine_submit itself checks. Any thread. */
struct admit_pool;
void engine_admit_pool(const engine *e, struct admit_pool *out);

#endif
