/* The names of the /metrics series that one side of tps writes and another
 * reads: the server exports them (server_metrics.c), tps sweep scrapes
 * them around each point (bench/experiment/sweep.c). Written once here so
 * a rename cannot leave a reader behind; what each means is
 * docs/metrics.md's. Series only the server writes keep their literal
 * names where they are written. Holds no code. */
#ifndef TPS_METRICS_METRIC_NAMES_H
#define TPS_METRICS_METRIC_NAMES_H

#define TPS_M_STEPS               "tps_steps_total"
#define TPS_M_PROMPT_TOKENS       "tps_prompt_tokens_total"
#define TPS_M_GENERATION_TOKENS   "tps_generation_tokens_total"
#define TPS_M_PREEMPTIONS         "tps_preemptions_total"
#define TPS_M_WEIGHT_BYTES_READ   "tps_weight_bytes_read_total"
#define TPS_M_KV_BYTES_READ       "tps_kv_bytes_read_total"
#define TPS_M_STEP_SECONDS        "tps_step_seconds_total"
#define TPS_M_MACHINE_READ_BW     "tps_machine_read_bandwidth_bytes_per_second"
#define TPS_M_MACHINE_INT8        "tps_machine_int8_multiply_adds_per_second"
#define TPS_M_MACHINE_LIMITS_BUSY "tps_machine_limits_busy"
#define TPS_M_EXPERTS_RUN         "tps_experts_run_total"
#define TPS_M_MODEL_EXPERTS       "tps_model_experts"
#define TPS_M_MODEL_LAYERS        "tps_model_layers"

#endif
