import time, torch, sys
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
t0 = time.time(); i = 0
try:
    while True:
        x = torch.randn(256, 1024, device="cuda")
        loss = m(x).square().mean()
        opt.zero_grad(); loss.backward(); opt.step()
        v = loss.item(); i += 1
        if i % 200 == 0:
            print("step", i, "t", round(time.time() - t0, 2), "loss", v, flush=True)
except Exception as e:
    print("error_at_epoch", repr(time.time()), type(e).__name__, flush=True)
    raise
