# train_gpt.py OUT [SIGNAL_DIR]: a GPT-style model, 200 AdamW steps, deterministic;
# prints every step's loss. GPT_SIZE=134m: a 134 M-parameter model (12 layers
# of 768, a 32,000-token vocabulary) instead of the default 3.6 M one;
# GPT_STEPS=N: N steps instead of 200. With SIGNAL_DIR, after step 100 it writes
# SIGNAL_DIR/step100 and waits (at most 60 s) for SIGNAL_DIR/go.
import os, sys, time, torch
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
V, D, L, T, B = (32000, 768, 12, 256, 8) if os.environ.get("GPT_SIZE") == "134m" else (512, 256, 4, 64, 16)
STEPS = int(os.environ.get("GPT_STEPS", "200"))
class Block(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1 = torch.nn.LayerNorm(D); s.att = torch.nn.MultiheadAttention(D, D // 64, batch_first=True)
        s.ln2 = torch.nn.LayerNorm(D); s.mlp = torch.nn.Sequential(torch.nn.Linear(D, 4 * D), torch.nn.GELU(), torch.nn.Linear(4 * D, D))
    def forward(s, x):
        m = torch.triu(torch.ones(x.shape[1], x.shape[1], device=x.device, dtype=torch.bool), 1)
        h = s.ln1(x); x = x + s.att(h, h, h, attn_mask=m, need_weights=False)[0]
        return x + s.mlp(s.ln2(x))
class GPT(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = torch.nn.Embedding(V, D); s.pos = torch.nn.Parameter(torch.zeros(T, D))
        s.blocks = torch.nn.ModuleList(Block() for _ in range(L)); s.ln = torch.nn.LayerNorm(D); s.head = torch.nn.Linear(D, V)
    def forward(s, idx):
        x = s.emb(idx) + s.pos
        for b in s.blocks: x = b(x)
        return s.head(s.ln(x))
m = GPT().cuda()
opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
g = torch.Generator().manual_seed(1)
data = torch.randint(0, V, (STEPS, B, T + 1), generator=g)
out = open(sys.argv[1], "w")
sig = sys.argv[2] if len(sys.argv) > 2 else None
for step in range(STEPS):
    batch = data[step].cuda()
    logits = m(batch[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), batch[:, 1:].reshape(-1))
    opt.zero_grad(); loss.backward(); opt.step()
    out.write("%d %.10f\n" % (step, loss.item())); out.flush()
    if sig and step == 99:
        open(os.path.join(sig, "step100"), "w").close()
        t0 = time.time()
        while not os.path.exists(os.path.join(sig, "go")) and time.time() - t0 < 60: time.sleep(0.05)
print("done", flush=True)
