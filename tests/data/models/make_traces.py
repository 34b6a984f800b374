#!/usr/bin/env python3
"""One CPU training step of a small real model, to be traced by bbshim.

Corpus of real-model traces for bbreplay's self-check (bbreplay TRACE --check-only).
Every model is built from its constructor/config with random init (no weights are
downloaded), seeded with torch.manual_seed(0), and runs ONE training step:
forward, loss, backward, torch.optim.AdamW step, zero_grad.

How the traces in this folder were made (CPU, 2-core VM):

    LD_PRELOAD=build/lib/libbbshim.so \
    BB_TRACE=tests/data/models/<name>.yaml BB_FLUSH_SECONDS=0 \
        .venv/bin/python tests/data/models/make_traces.py <name>

with torch 2.11.0+cu130 (PyPI wheel, run on the CPU), torchvision 0.26.0 (installed with
--no-deps: it requires torch==2.11.0) and transformers 5.24.0. `make_traces.py all` (or
several names) runs each model in a fresh process with the preload set from $BB_PRELOAD
(default build/lib/libbbshim.so of this checkout) and writes <name>.yaml next to this script.

Sizes: vision models batch 2 at 64x64 (vit: VisionTransformer image 32, patch 8,
2 layers, hidden 64), 10 classes; language models 2 layers, hidden 64, vocab 1000,
batch 2, sequence 16; default attention implementation of transformers (sdpa).
The model's construction (random init) is traced too. AdamW runs its default CPU path
(per-parameter ops, no foreach/fused).

The CNNs and swin_t are shallower configurations of the stock torchvision classes (see
vision_model: same block types, fewer stages/blocks), so that each trace stays near 300 KB;
a training step of the stock models has 900-4900 distinct signatures (0.45-2.4 MB of trace).
`--full` builds the stock architectures instead (traces used for analysis only, not kept here):

    BB_TRACE_DIR=/tmp/corpus/full .venv/bin/python tests/data/models/make_traces.py all --full
"""
import os
import subprocess
import sys

VISION = ["resnet50", "mobilenet_v3_small", "efficientnet_b0", "convnext_tiny",
          "densenet121", "regnet_y_400mf", "swin_t", "vit"]
TEXT = ["gpt2", "bert", "distilbert", "t5", "llama"]
# The same model trained under torch.autocast("cpu", dtype=torch.bfloat16) (forward and loss), as mixed
# precision training runs: the tracer records the calls autocast makes with the cast arguments.
AUTOCAST = ["gpt2_autocast"]
MODELS = VISION + TEXT + AUTOCAST

BATCH = 2
IMAGE = 64
NUM_CLASSES = 10
VOCAB = 1000
SEQ = 16
HIDDEN = 64


def vision_model(name, full=False):
    """The model and its image size. Stock torchvision architectures with --full; by default
    shallower configurations of the same classes (same block types, fewer stages or blocks),
    because a training step of the stock models has 900-4900 distinct signatures (0.45-2.4 MB of
    trace) and these traces are meant to be small and to replay fast."""
    from functools import partial

    import torch
    import torchvision.models as tvm
    from torchvision.models import (convnext, densenet, efficientnet, mobilenetv3, regnet, resnet,
                                    swin_transformer)
    from torchvision.models.vision_transformer import VisionTransformer
    if name == "vit":  # always small: 2 layers, hidden 64, 32x32 images, 8x8 patches
        return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                 hidden_dim=HIDDEN, mlp_dim=2 * HIDDEN,
                                 num_classes=NUM_CLASSES), 32
    if full:
        return getattr(tvm, name)(weights=None, num_classes=NUM_CLASSES), IMAGE
    if name == "resnet50":  # Bottleneck blocks, one per stage, stages 1-3 (no layer4)
        m = resnet.ResNet(resnet.Bottleneck, [1, 1, 1, 1], num_classes=NUM_CLASSES)
        m.layer4 = torch.nn.Identity()
        m.fc = torch.nn.Linear(1024, NUM_CLASSES)
        return m, IMAGE
    if name == "densenet121":  # densenet121's growth 32 and stem 64, dense blocks of 2 layers, 3 blocks
        return densenet.DenseNet(32, (2, 2, 2), 64, num_classes=NUM_CLASSES), IMAGE
    if name == "efficientnet_b0":  # b0's first two stages (MBConv1 and MBConv6 x2 with SE,
        # stochastic depth, residual), b0's stem and head
        setting, last = efficientnet._efficientnet_conf("efficientnet_b0", width_mult=1.0, depth_mult=1.0)
        return efficientnet.EfficientNet(setting[:2], 0.2, last_channel=last,
                                         num_classes=NUM_CLASSES), IMAGE
    if name == "mobilenet_v3_small":  # its first three blocks (SE, stride 2, residual), stem and head
        setting, last = mobilenetv3._mobilenet_v3_conf("mobilenet_v3_small")
        return mobilenetv3.MobileNetV3(setting[:3], last, num_classes=NUM_CLASSES), IMAGE
    if name == "regnet_y_400mf":  # regnet_y_400mf's parameters with depth 2 (instead of 16)
        params = regnet.BlockParams.from_init_params(depth=2, w_0=48, w_a=27.89, w_m=2.09,
                                                     group_width=8, se_ratio=0.25)
        return regnet.RegNet(params, num_classes=NUM_CLASSES,
                             norm_layer=partial(torch.nn.BatchNorm2d, eps=1e-05, momentum=0.1)), IMAGE
    if name == "swin_t":  # swin_t's first stage (a window and a shifted-window block), 7x7 windows
        return swin_transformer.SwinTransformer([4, 4], 96, [2], [3], [7, 7], stochastic_depth_prob=0.2,
                                                num_classes=NUM_CLASSES), IMAGE
    if name == "convnext_tiny":  # convnext_tiny's first two stages, one block each
        cfg = [convnext.CNBlockConfig(96, 192, 1), convnext.CNBlockConfig(192, None, 1)]
        return convnext.ConvNeXt(cfg, stochastic_depth_prob=0.1, num_classes=NUM_CLASSES), IMAGE
    raise SystemExit(f"unknown model {name}")


def text_model(name):
    import transformers as tr
    common_vocab = dict(vocab_size=VOCAB)
    if name == "gpt2":
        cfg = tr.GPT2Config(n_layer=2, n_embd=HIDDEN, n_head=2, n_positions=64, **common_vocab)
        return tr.GPT2LMHeadModel(cfg), "causal"
    if name == "bert":
        cfg = tr.BertConfig(hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=2 * HIDDEN, max_position_embeddings=64,
                            **common_vocab)
        return tr.BertForMaskedLM(cfg), "masked"
    if name == "distilbert":
        cfg = tr.DistilBertConfig(dim=HIDDEN, n_layers=2, n_heads=2, hidden_dim=2 * HIDDEN,
                                  max_position_embeddings=64, **common_vocab)
        return tr.DistilBertForMaskedLM(cfg), "masked"
    if name == "t5":
        cfg = tr.T5Config(d_model=HIDDEN, d_ff=2 * HIDDEN, d_kv=32, num_layers=2,
                          num_decoder_layers=2, num_heads=2, decoder_start_token_id=0,
                          pad_token_id=0, **common_vocab)
        return tr.T5ForConditionalGeneration(cfg), "seq2seq"
    if name == "llama":
        cfg = tr.LlamaConfig(hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
                             num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                             max_position_embeddings=64, **common_vocab)
        return tr.LlamaForCausalLM(cfg), "causal"
    raise SystemExit(f"unknown model {name}")


def train_step(name, full=False):
    import contextlib

    import torch
    torch.manual_seed(0)
    autocast = name.endswith("_autocast")
    name = name.removesuffix("_autocast")
    precision = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()
    if name in VISION:
        model, size = vision_model(name, full)
        model.train()
        x = torch.randn(BATCH, 3, size, size)
        y = torch.randint(0, NUM_CLASSES, (BATCH,))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        with precision:
            loss = torch.nn.functional.cross_entropy(model(x), y)
    else:
        model, kind = text_model(name)
        model.train()
        ids = torch.randint(1, VOCAB, (BATCH, SEQ))
        mask = torch.ones(BATCH, SEQ, dtype=torch.long)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        with precision:
            if kind == "seq2seq":
                labels = torch.randint(1, VOCAB, (BATCH, SEQ))
                out = model(input_ids=ids, attention_mask=mask, labels=labels)
            else:
                out = model(input_ids=ids, attention_mask=mask, labels=ids.clone())
        loss = out.loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    print(f"{name}{' (bf16 autocast)' if autocast else ''}: loss {loss.item():.4f}")


def main(argv):
    full = "--full" in argv
    names = [a for a in argv[1:] if a != "--full"] or ["all"]
    if names == ["all"]:
        names = MODELS
    if len(names) == 1:
        return train_step(names[0], full)
    here = os.environ.get("BB_TRACE_DIR", os.path.dirname(os.path.abspath(__file__)))
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    preload = os.environ.get("BB_PRELOAD", os.path.join(root, "build", "lib", "libbbshim.so"))
    for n in names:
        env = dict(os.environ, LD_PRELOAD=preload, BB_FLUSH_SECONDS="0",
                   BB_TRACE=os.path.join(here, f"{n}.yaml"))
        subprocess.run([sys.executable, os.path.abspath(__file__), n] + (["--full"] if full else []),
                       env=env, check=True)


if __name__ == "__main__":
    main(sys.argv)
