"""workloads.py - the PyTorch workloads of the SCUDA GPU suite.

Each workload is a function returning a dict of results that must match
between a native run and a run through SCUDA. `digest` summarizes a tensor
both exactly (a hash of its bytes) and approximately (sum, first values),
so each test can choose how strictly to compare."""
import hashlib


def digest(t):
    import torch
    c = t.detach().float().cpu().contiguous() if t.dtype in (torch.float16, torch.bfloat16) else t.detach().cpu().contiguous()
    return {
        "sha": hashlib.sha256(c.numpy().tobytes()).hexdigest(),
        "sum": float(c.double().sum()),
        "head": [float(v) for v in c.flatten()[:6].double()],
        "shape": list(c.shape),
    }


def device_basics():
    import torch
    p = torch.cuda.get_device_properties(0)
    free, total = torch.cuda.mem_get_info()
    x = torch.ones(1 << 20, device="cuda")
    allocated = torch.cuda.memory_allocated()
    del x
    torch.cuda.empty_cache()
    return {"available": torch.cuda.is_available(), "count": torch.cuda.device_count(),
            "name": torch.cuda.get_device_name(0), "cc": [p.major, p.minor], "sms": p.multi_processor_count,
            "total_mem": p.total_memory, "mem_get_info_total": total, "free_positive": free > 0,
            "allocated": allocated}


def tensors():
    import torch
    torch.manual_seed(1)
    x = torch.randn(1000, device="cuda")
    s, i = torch.sort(x)
    return {"elementwise": digest(x.sin() * 2 + x.abs()), "sum": digest(x.sum()), "max": digest(x.max()),
            "sorted": digest(s), "index": digest(x[i[:10]]), "where": digest(torch.where(x > 0, x, -x)),
            "arange": digest(torch.arange(100, device="cuda") % 7)}


def copies():
    import torch
    torch.manual_seed(2)
    a = torch.randn(1 << 22)
    pageable = a.cuda().cpu()
    pinned = a.pin_memory().cuda(non_blocking=True)
    torch.cuda.synchronize()
    back = torch.empty_like(a).pin_memory()
    back.copy_(pinned, non_blocking=True)
    torch.cuda.synchronize()
    return {"pageable": torch.equal(a, pageable), "pinned": torch.equal(a, back), "d": digest(pinned)}


def matmul():
    import torch
    torch.manual_seed(3)
    out = {}
    for name, dtype, tf32 in [("fp32", torch.float32, False), ("tf32", torch.float32, True),
                              ("fp16", torch.float16, False), ("bf16", torch.bfloat16, False)]:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(256, 512, device="cuda", dtype=dtype)
        b = torch.randn(512, 128, device="cuda", dtype=dtype)
        out[name] = digest(a @ b)
        out[name + "_bmm"] = digest(torch.bmm(a.view(4, 64, 512), b.view(1, 512, 128).expand(4, 512, 128)))
    return out


def linalg():
    import torch
    torch.manual_seed(4)
    a = torch.randn(64, 64, device="cuda", dtype=torch.float64)
    spd = a @ a.T + 64 * torch.eye(64, device="cuda", dtype=torch.float64)
    b = torch.randn(64, 3, device="cuda", dtype=torch.float64)
    return {"cholesky": digest(torch.linalg.cholesky(spd)), "solve": digest(torch.linalg.solve(spd, b))}


def fft():
    import torch
    torch.manual_seed(5)
    return {"fft2": digest(torch.view_as_real(torch.fft.fft2(torch.randn(64, 64, device="cuda"))))}


def sparse():
    import torch
    torch.manual_seed(6)
    dense = torch.randn(64, 64, device="cuda")
    mask = torch.rand(64, 64, device="cuda") > 0.9
    s = (dense * mask).to_sparse()
    return {"spmm": digest(torch.sparse.mm(s, torch.randn(64, 8, device="cuda")))}


def random_philox():
    import torch
    torch.manual_seed(1234)
    return {"rand": digest(torch.rand(10000, device="cuda")), "randn": digest(torch.randn(10000, device="cuda")),
            "randint": digest(torch.randint(0, 1000, (1000,), device="cuda"))}


def conv():
    import torch
    torch.manual_seed(7)
    out = {}
    for bench in (False, True):
        torch.backends.cudnn.benchmark = bench
        conv = torch.nn.Conv2d(3, 16, 3, padding=1).cuda()
        bn = torch.nn.BatchNorm2d(16).cuda()
        x = torch.randn(4, 3, 32, 32, device="cuda", requires_grad=True)
        y = bn(conv(x))
        y.square().mean().backward()
        out["bench" if bench else "default"] = {"y": digest(y)["sum"], "grad": digest(x.grad)["sum"]}
    return out


def attention():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    torch.manual_seed(8)
    q, k, v = (torch.randn(2, 4, 128, 64, device="cuda", dtype=torch.float16) for _ in range(3))
    out = {}
    for name, backend in [("flash", SDPBackend.FLASH_ATTENTION), ("mem_efficient", SDPBackend.EFFICIENT_ATTENTION)]:
        with sdpa_kernel(backend):
            out[name] = digest(torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))
    return out


def autocast_bf16():
    import torch
    torch.manual_seed(9)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 8)).cuda()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = m(torch.randn(16, 64, device="cuda"))
    return {"dtype": str(y.dtype), "y": digest(y)}


def train_transformer():
    import torch
    torch.manual_seed(10)
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
    m = torch.nn.TransformerEncoder(layer, 2).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    x = torch.randn(8, 16, 64, device="cuda")
    losses = []
    for _ in range(50):
        loss = m(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return {"losses": losses}


def resnet18_step():
    import torch
    import torchvision
    torch.manual_seed(11)
    m = torchvision.models.resnet18(num_classes=10).cuda()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = torch.randn(8, 3, 64, 64, device="cuda")
    loss = torch.nn.functional.cross_entropy(m(x), torch.randint(0, 10, (8,), device="cuda"))
    loss.backward()
    opt.step()
    return {"loss": float(loss), "finite": bool(torch.isfinite(loss))}


def compiled():
    import torch
    torch.manual_seed(12)
    f = torch.compile(lambda x: torch.nn.functional.gelu(x) * x.sin() + 1)
    x = torch.randn(4096, device="cuda")
    return {"y": digest(f(x))}


def cuda_graph():
    import torch
    x = torch.zeros(1024, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x.mul_(2).add_(1)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    return {"x": digest(x)}


def streams_events():
    import torch
    a = torch.ones(1 << 20, device="cuda")
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    e = torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(s1):
        b = a * 3
        e.record()
    with torch.cuda.stream(s2):
        s2.wait_event(e)
        c = b + 1
    torch.cuda.current_stream().wait_stream(s2)
    return {"c": digest(c), "query": e.query()}


def dataloader_pinned():
    import torch

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            return torch.full((16,), float(i))

    dl = torch.utils.data.DataLoader(Data(), batch_size=8, num_workers=2, pin_memory=True)
    total = torch.zeros(16, device="cuda")
    for batch in dl:
        total += batch.cuda(non_blocking=True).sum(0)
    return {"total": digest(total)}


def expandable_segments():
    """20 training steps with the allocator's expandable segments (VMM:
    cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess)."""
    import os
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    import torch
    torch.manual_seed(20)
    torch.use_deterministic_algorithms(True, warn_only=True)
    m = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).cuda()
    opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
    losses = []
    for step in range(20):
        x = torch.randn(64 * (1 + step % 4), 256, device="cuda")  # varying sizes grow the segment
        loss = m(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    segments = torch.cuda.memory_snapshot()
    expandable = any(s.get("is_expandable", False) for s in segments)
    return {"losses": losses, "expandable": expandable}


ALL = {f.__name__: f for f in [device_basics, tensors, copies, matmul, linalg, fft, sparse, random_philox, conv,
                                attention, autocast_bf16, train_transformer, resnet18_step, compiled, cuda_graph,
                                streams_events, dataloader_pinned, expandable_segments]}
