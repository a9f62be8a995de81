# split_train.py OUT: a small GPT-style model split over two devices (the
# first half of its blocks on cuda:0, the rest and the head on cuda:1,
# activations moved with .to()), 50 AdamW steps, deterministic; writes the
# device count and every step's loss to OUT. Then times a 256 MiB copy
# from cuda:0 to cuda:1 and prints it as a "# " line (not compared).
# SPLIT_DEV1=0 puts the second half on cuda:0 too (a native reference on a
# machine with one GPU, for two servers sharing it).
import os, sys, time, torch
torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
V, D, L, T, B, STEPS = 512, 256, 4, 64, 16, 50
out = open(sys.argv[1], "w")
n = torch.cuda.device_count()
out.write("devices %d\n" % n)
for i in range(n):
    out.write("device %d: %s\n" % (i, torch.cuda.get_device_name(i)))
dev0, dev1 = torch.device("cuda:0"), torch.device("cuda:%s" % os.environ.get("SPLIT_DEV1", "1"))

class Block(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.ln1 = torch.nn.LayerNorm(D); s.att = torch.nn.MultiheadAttention(D, 4, batch_first=True)
        s.ln2 = torch.nn.LayerNorm(D); s.mlp = torch.nn.Sequential(torch.nn.Linear(D, 4 * D), torch.nn.GELU(), torch.nn.Linear(4 * D, D))
    def forward(s, x):
        m = torch.triu(torch.ones(x.shape[1], x.shape[1], device=x.device, dtype=torch.bool), 1)
        h = s.ln1(x); x = x + s.att(h, h, h, attn_mask=m, need_weights=False)[0]
        return x + s.mlp(s.ln2(x))

class SplitGPT(torch.nn.Module):
    def __init__(s):
        super().__init__()
        s.emb = torch.nn.Embedding(V, D); s.pos = torch.nn.Parameter(torch.zeros(T, D))
        s.first = torch.nn.ModuleList(Block() for _ in range(L // 2))
        s.second = torch.nn.ModuleList(Block() for _ in range(L - L // 2))
        s.ln = torch.nn.LayerNorm(D); s.head = torch.nn.Linear(D, V)
    def place(s):
        for m in (s.emb, s.first): m.to(dev0)
        s.pos.data = s.pos.data.to(dev0)
        for m in (s.second, s.ln, s.head): m.to(dev1)
        return s
    def forward(s, idx):
        x = s.emb(idx) + s.pos
        for b in s.first: x = b(x)
        x = x.to(dev1)  # the activations cross to the second device
        for b in s.second: x = b(x)
        return s.head(s.ln(x))

m = SplitGPT().place()
opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
g = torch.Generator().manual_seed(1)
data = torch.randint(0, V, (STEPS, B, T + 1), generator=g)
for step in range(STEPS):
    batch = data[step]
    logits = m(batch[:, :-1].to(dev0))
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), batch[:, 1:].to(dev1).reshape(-1))
    opt.zero_grad(); loss.backward(); opt.step()
    out.write("%d %.10f\n" % (step, loss.item())); out.flush()

a = torch.ones(256 << 20, dtype=torch.uint8, device=dev0)
b = torch.empty_like(a, device=dev1)
for _ in range(2): b.copy_(a)  # warm up
torch.cuda.synchronize(dev0); torch.cuda.synchronize(dev1)
t0 = time.perf_counter(); reps = 5
for _ in range(reps): b.copy_(a)
torch.cuda.synchronize(dev0); torch.cuda.synchronize(dev1)
gbps = reps * a.numel() / (time.perf_counter() - t0) / 1e9
ok = bool(torch.equal(b.cpu(), a.cpu()))
out.write("# copy cuda:0 -> %s: 256 MiB at %.2f GB/s\n" % (dev1, gbps))
out.write("copy byte-exact %s\n" % ok)
out.close()
