"""The held-out suite: training workloads that no calibration or fit ever sees.

Each workload is an independently written plain-PyTorch script in
``workloads/`` (none imports the project's examples or Maya).  Its ground truth
is measured on real GPUs by ``campaign.py`` with the argv listed here; the
accuracy benchmark compares ``maya predict`` of the same command with it.

Discipline:
- Never fit, calibrate or tune anything (host model, estimators, replay
  rules, thresholds) on these workloads or their measurements.  Report their
  errors apart from the calibration cases.
- The suite is frozen on ``FROZEN``: a workload's script and argv do not
  change after that.  The suite only grows, by new workloads whose ground
  truth is measured after a model change; those that exist stay as they are.

Importable with nothing but the standard library (the campaign runs on a GPU
machine with only its own python3 and torch).
"""
from __future__ import annotations

from dataclasses import dataclass

FROZEN = "2026-11-26"

H100 = "H100-SXM-80GB"
H200 = "H200-SXM-141GB"
STEPS = ["--steps", "30"]


@dataclass(frozen=True)
class Workload:
    name: str
    script: str  # relative to the repository root
    argv: tuple[str, ...]  # the ground-truth command line after the script (sizes, steps, warm-up)
    gpus: int  # processes (one GPU each) of one node
    measured_on: tuple[str, ...]  # catalog GPU names (maya gpus) the truth is measured on
    family: str
    # What emulation is known to miss for this workload (empty: nothing known).  Informative only:
    # the workload stays in the suite and its error is reported like any other.
    known_gap: str = ""

    @property
    def ddp(self) -> bool:
        return self.gpus > 1


def _w(name: str, family: str, argv: list[str], gpus: int = 1, known_gap: str = "",
       on: tuple[str, ...] | None = None) -> Workload:
    on = on or ((H200,) if gpus > 1 else (H100, H200))
    return Workload(name, f"benchmarks/held_out/workloads/{name}.py", tuple(argv + STEPS), gpus, on, family,
                    known_gap)


DATA_DEPENDENT = "data-dependent work, whose device values no kernel computes under emulation: "


WORKLOADS: tuple[Workload, ...] = (
    _w("ddp_gpt2_tied", "decoder LM, DDP", ["--batch", "8", "--seq-len", "1024", "--n-layer", "12",
                                            "--d-model", "768", "--warmup", "5"], gpus=2),
    _w("ddp_gpt_medium", "decoder LM, DDP", ["--batch", "4", "--block-size", "1024", "--n-layer", "24",
                                             "--n-embd", "1024", "--warmup", "5"], gpus=2),
    _w("ddp_convnext_accum", "CNN, DDP with gradient accumulation", ["--batch", "64", "--accum", "2",
                                                                     "--image-size", "224", "--warmup", "5"], gpus=2),
    _w("vit", "vision transformer", ["--batch", "128", "--image-size", "224", "--warmup", "5"]),
    _w("seq2seq_transformer", "encoder-decoder", ["--batch", "64", "--src-len", "256", "--tgt-len", "256",
                                                  "--warmup", "5"]),
    _w("diffusion_unet", "diffusion UNet", ["--batch", "64", "--resolution", "64", "--channels", "128",
                                            "--warmup", "5"]),
    _w("moe", "mixture of experts", ["--batch", "8", "--seq", "1024", "--experts", "8", "--top-k", "2",
                                     "--warmup", "5"],
       known_gap=DATA_DEPENDENT + "the per-expert token counts are drawn as a balanced router's; the real "
                                  "router's are far less balanced and drift, so its expert GEMMs take four times as "
                                  "many new shapes a step (295 against 71), and its steps vary (105 to 194 ms in one "
                                  "run)"),
    _w("compiled_llama", "torch.compile decoder", ["--batch", "8", "--seq", "1024", "--dim", "1024",
                                                   "--layers", "12", "--warmup", "5"]),
    _w("sparse_recsys", "sparse embeddings", ["--batch", "65536", "--dim", "64", "--warmup", "5"]),
    _w("lstm_lm", "recurrent (cuDNN LSTM)", ["--batch", "64", "--bptt", "128", "--nhid", "1024",
                                             "--nlayers", "3", "--warmup", "5"]),
    _w("resnet50", "CNN", ["--batch", "256", "--image-size", "224", "--warmup", "5"]),
    _w("bert_fp16", "encoder, fp16 GradScaler", ["--batch", "64", "--seq-len", "128", "--warmup", "10"]),
    # Added 2026-11-26, after the interval and host-model studies, and measured then (on H100s: the
    # machines lent that day were H100s); on an H200 first on 2026-11-28, as were the three below.
    _w("dlrm_adagrad", "DLRM recommender, Adagrad", ["--batch", "4096", "--warmup", "5"], on=(H100, H200)),
    # Added 2026-11-26, after data-dependent operations got expected results under emulation
    # (maya/_hook/_maya_device_values.py), and measured then on two H100 machines (an H200 was asked
    # for and H100s came): the first test of those assumptions on scripts written after them.
    _w("switch_moe", "mixture of experts, top-1, split by host counts", ["--batch", "16", "--seq", "512",
                                                                        "--warmup", "5"], on=(H100, H200)),
    _w("wide_deep_adagrad", "sparse embeddings, Adagrad, skewed ids", ["--batch", "65536", "--warmup", "5"],
       on=(H100, H200), known_gap=DATA_DEPENDENT + "coalesce's summing kernel runs one warp per distinct row, so its "
                                               "time follows how often the hottest ids repeat (power-law ids: "
                                               "41 of the 54 ms step); emulation prices a plain sum (found on its "
                                               "first measurement)"),
    # Added 2026-11-26, after a router's topk and the values computed from it got a balanced router's values
    # under emulation (the same module), and measured then on H100s.
    _w("mixtral_moe", "mixture of experts, top-2, Hugging Face routing", ["--batch", "8", "--seq", "1024",
                                                                         "--warmup", "5"], on=(H100, H200)),
    # Added 2026-11-29, after cuDNN RNN calls were priced with the server's host time and their work paced by
    # it (benchmarks/calibration/rnn_host.py), and measured then on an H200 (the one kind lent that day):
    # recurrent jobs of small layers, whose calls the host paces.
    _w("char_gru", "recurrent (cuDNN GRU), character LM", ["--batch", "32", "--seq", "200", "--hidden", "512",
                                                            "--layers", "2", "--warmup", "5"], on=(H200,)),
    _w("bilstm_tagger", "recurrent (cuDNN bidirectional LSTM), packed", ["--batch", "128", "--max-len", "64",
                                                                          "--hidden", "256", "--warmup", "5"],
       on=(H200,)),
    # Added 2026-11-29, after steps that differ in their operations were cut at the loop's waits
    # (maya.predictor.replay.iterations) and cuDNN's RNN workspace was measured, and measured then on an H200:
    # a loop whose shapes change every step, and a second packed recurrent loop.
    _w("bucketed_encoder", "encoder, length-bucketed batches", ["--batch", "192", "--buckets", "128,256,384",
                                                                "--warmup", "5"], on=(H200,)),
    _w("packed_gru_frames", "recurrent (cuDNN bidirectional GRU), packed and sorted",
       ["--batch", "32", "--max-frames", "300", "--hidden", "320", "--layers", "3", "--warmup", "5"], on=(H200,)),
    # Added 2026-11-29 (later), after the H200's node factor was refitted (1.05 -> 1.40) and the interval took
    # only the spread of steps of the same work, and measured then on an H200 (the one kind lent): activations
    # recomputed in the backward, and a graph network's gathers and atomic scatters.
    _w("checkpointed_gpt", "decoder LM, activation checkpointing, gradient accumulation",
       ["--batch", "8", "--accum", "2", "--seq", "1024", "--layers", "16", "--warmup", "5"], on=(H200,)),
    _w("graphsage", "graph network, full-graph message passing", ["--nodes", "262144", "--edges", "2097152",
                                                                   "--warmup", "5"], on=(H200,)),
    # Added 2026-11-29 (stop 53), after ranks that outnumber the emulating CPUs had their sharing undone
    # (maya.cpu_sharing), and measured then on H200s (the kinds lent): a model sharded with FSDP2 (its
    # parameters gathered and its gradients reduce-scattered block by block), LoRA adapters on a frozen bf16
    # base, and a GAN's two networks trained in turn.
    _w("fsdp2_llama", "decoder LM, FSDP2 (fully_shard per block)",
       ["--batch", "2", "--seq", "2048", "--dim", "2048", "--layers", "16", "--warmup", "5"], gpus=2),
    _w("lora_finetune", "decoder LM, LoRA adapters on a frozen bf16 base",
       ["--batch", "8", "--seq", "1024", "--width", "2048", "--layers", "24", "--warmup", "5"], on=(H200,)),
    _w("dcgan", "GAN, generator and discriminator in turn", ["--batch", "128", "--warmup", "5"], on=(H200,)),
)

BY_NAME = {w.name: w for w in WORKLOADS}
