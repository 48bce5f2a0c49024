# SPDX-License-Identifier: MIT
"""Small nn.Modules of the compile and graph tests (test_compile.py, test_graphs.py)."""
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(64, 128)
        self.b = nn.Linear(128, 64)
        self.c = nn.Linear(64, 64)

    def forward(self, x):
        return self.c(F.gelu(self.b(torch.relu(self.a(x)))))


class Gated(nn.Module):
    def __init__(self, h=64, f=128):
        super().__init__()
        self.gate = nn.Linear(h, f, bias=False)
        self.up = nn.Linear(h, f, bias=False)
        self.down = nn.Linear(f, h, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))
