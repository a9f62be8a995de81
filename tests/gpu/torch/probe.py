"""probe.py - walks PyTorch's CUDA stack one step at a time and reports
each step, so a run through SCUDA shows the first thing that breaks.
Usage: python3 probe.py [STEP...]   (default: all steps, in order)."""
import sys
import time
import traceback


def step_import():
    import torch  # noqa: F401


def step_available():
    import torch
    assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
    print("   device:", torch.cuda.get_device_name(0), torch.cuda.device_count())


def step_tensor():
    import torch
    x = torch.arange(16, device="cuda", dtype=torch.float32)
    assert (x + 1).sum().item() == 136.0


def step_copies():
    import torch
    a = torch.randn(1 << 20)
    b = a.cuda().cpu()
    assert torch.equal(a, b)
    p = a.pin_memory()
    c = p.to("cuda", non_blocking=True)
    torch.cuda.synchronize()
    assert torch.equal(c.cpu(), a)


def step_reduce_sort():
    import torch
    x = torch.randn(10000, device="cuda")
    s, i = torch.sort(x)
    assert bool((s[1:] >= s[:-1]).all())


def step_random():
    import torch
    torch.manual_seed(0)
    print("   rand:", torch.rand(4, device="cuda").tolist())


def step_matmul_fp32():
    import torch
    a = torch.randn(256, 256, device="cuda")
    b = torch.randn(256, 256, device="cuda")
    c = a @ b
    ref = a.cpu() @ b.cpu()
    assert torch.allclose(c.cpu(), ref, atol=1e-3), "fp32 matmul mismatch"


def step_matmul_fp16():
    import torch
    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    c = a @ a
    torch.cuda.synchronize()
    assert c.isfinite().all()


def step_conv():
    import torch
    conv = torch.nn.Conv2d(3, 8, 3).cuda()
    y = conv(torch.randn(2, 3, 32, 32, device="cuda"))
    y.sum().backward()
    torch.cuda.synchronize()


def step_linalg():
    import torch
    a = torch.randn(64, 64, device="cuda", dtype=torch.float64)
    a = a @ a.T + 64 * torch.eye(64, device="cuda", dtype=torch.float64)
    torch.linalg.cholesky(a)
    torch.linalg.solve(a, torch.randn(64, 1, device="cuda", dtype=torch.float64))


def step_fft():
    import torch
    torch.fft.fft2(torch.randn(64, 64, device="cuda"))
    torch.cuda.synchronize()


def step_train():
    import torch
    torch.manual_seed(0)
    m = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True), 2).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    x = torch.randn(8, 16, 64, device="cuda")
    for _ in range(3):
        loss = m(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("   loss:", loss.item())


def step_compile():
    import torch
    f = torch.compile(lambda x: (x.sin() + x.cos()) * 2)
    y = f(torch.randn(1024, device="cuda"))
    torch.cuda.synchronize()
    assert y.isfinite().all()


def step_graph():
    import torch
    x = torch.zeros(16, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x.add_(1)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x.add_(1)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    assert x[0].item() == 4.0 + 0 or x[0].item() >= 3.0


STEPS = [(n[5:], f) for n, f in list(globals().items()) if n.startswith("step_")]

if __name__ == "__main__":
    wanted = set(sys.argv[1:])
    ok = fail = 0
    for name, fn in STEPS:
        if wanted and name not in wanted:
            continue
        t = time.time()
        try:
            fn()
            ok += 1
            print(f"STEP {name}: ok ({time.time() - t:.2f} s)", flush=True)
        except Exception as e:  # report and go on to the next step
            fail += 1
            print(f"STEP {name}: FAIL {type(e).__name__}: {str(e)[:300]}", flush=True)
            traceback.print_exc(limit=3)
    print(f"{ok} passed, {fail} failed")
