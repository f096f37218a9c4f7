"""How closely tokdyn and each peer must agree: bounds derived from the accuracy the two methods
compared state (their ODE tolerances, Newton tolerances, floating-point precision), not from the
difference one machine happened to give. Each function returns the bound of one comparison and its
derivation is in its docstring; a difference above the bound means the two programs do not compute
the same thing (bench_all reports DIFFER and exits 1).

Round-off enters as a probabilistic model (Higham and Mary, "A new approach to probabilistic
rounding error analysis", SIAM J. Sci. Comput. 41 (2019)): the rounding errors of a computation are
independent and mean-zero, so a value reached through n roundings of unit roundoff u is off by about
sqrt(n) u, relative; LAMBDA = 3 such standard deviations bound it. The worst-case bounds (n u) are
far above what any real computation shows and would accept real disagreements."""
import math

import numpy as np

U64 = 2.0 ** -53   # unit roundoff, IEEE double
U32 = 2.0 ** -24   # unit roundoff, IEEE single (the float32 forwards)
LAMBDA = 3.0       # standard deviations of the probabilistic round-off model


def roundoff(n, u):
    """Relative error of a value reached through n roundings: LAMBDA sqrt(n) u."""
    return LAMBDA * math.sqrt(n) * u


# ---- rope-table2: the 12 resonant rate fits (RoPE paper, App. D.2) --------------------------------

RATE_FIT = dict(eps=1e-4, t_factor=3.75, window=3.0, rtol=1e-10, atol=1e-12)  # both: rtol/atol, eps, T, window


def rate_fit_bound(n, nfev_scipy, eps=RATE_FIT["eps"], t_factor=RATE_FIT["t_factor"], rtol=RATE_FIT["rtol"],
                   atol=RATE_FIT["atol"]):
    """Bound on |gamma_fit(SciPy) - gamma_fit(tokdyn)| / gamma for one (n, m, beta).

    Both fits integrate the same phase flow from eps v (v the slow mode, unit max-norm) to
    T = t_factor / gamma with rtol = 1e-10, atol = 1e-12 (SciPy's DOP853; tokdyn's Bulirsch-Stoer)
    and fit the same least-squares slope of log N(t), N = ||theta - mean||_2, over the window
    0.75 <= gamma t <= 3.75 of the same output grid. The two differ only by their integration errors
    (the eigenproblems agree to about n u / gamma, below 1e-11 here; the fit's arithmetic is the same).

    1. Per step, the error control keeps each component's local error within
       atol + rtol (|y| + h |y'|) (Boost's Bulirsch-Stoer, max-norm; SciPy's RMS norm allows one
       component sqrt(n) times that, the same 2-norm bound). |y| <= eps and h |y'| ~ |y(t+h) - y(t)|
       <= 2 eps, so per component tol = atol + 3 rtol eps: atol dominates (the state is tiny).
    2. Relative to N: ||e||_2 <= sqrt(n) tol, and N(t) >= N_end = eps e^-t_factor ||v - mean v||_2
       (the slow mode decays at gamma; the window ends at gamma t = t_factor). ||v - mean v||_2 >=
       1/sqrt(2): v has the entry 1 and, being orthogonal to the positive left eigenvector of the
       consensus matrix, an entry v_j <= 0, and (1 - m)^2 + (v_j - m)^2 >= (1 - v_j)^2 / 2 >= 1/2.
       So one step's error is at most delta = sqrt(2 n) tol e^t_factor / eps of N.
    3. The flow contracts the transverse errors at least at the slow rate gamma, so a step's error
       keeps (at most) its size relative to N; the K steps add up to K delta in log N (first order),
       and the dense-output interpolation adds about one step's error.
    4. The least-squares slope over a window of length W = 3 / gamma moves by at most 3 D / W = D gamma
       for a perturbation D of log N: the relative error of gamma_fit is at most D.
    K: SciPy's DOP853 spends at least 12 evaluations per step, so K_S <= nfev / 12; tokdyn does not
    report its steps, and Bulirsch-Stoer (order up to 16) takes about as many as DOP853 (order 8) at
    these tolerances (9-20 and 1017 against DOP853's 9-27 and 971 for the 12 triples), counted as
    K_T <= 2 K_S. Bound: (K_S + 1 + K_T + 1) delta = (3 K_S + 2) delta."""
    tol = atol + 3.0 * rtol * eps
    delta = math.sqrt(2.0 * n) * tol * math.exp(t_factor) / eps
    k_s = nfev_scipy / 12.0
    return (3.0 * k_s + 2.0) * delta


# ---- float32 forwards: mamba2-fig1 (NumPy, PyTorch) and gpt2-depth (PyTorch) ---------------------

def gram_metric_bounds(eps_tokens, lambda1):
    """Bounds on |d lambda1| and |d r| / r of the token Gram matrix for a relative error eps_tokens of
    every token, per implementation, hence twice for the difference of two.

    lambda1 = max eig(G) / T and r = T^2 / ||G||_F^2 with G = Z Z^T, Z the T unit-normalised tokens.
    A relative error eps of a token turns its direction by at most 2 eps, so ||dZ||_F <= 2 eps sqrt(T)
    and ||dG|| <= 2 ||Z||_2 ||dZ||_F <= 4 T eps (||Z||_2 <= sqrt(T)): |d lambda1| <= 4 eps, and since
    ||G||_F >= ||G||_2 = T lambda1, |d r| / r = 2 |d ||G||_F| / ||G||_F <= 8 eps / lambda1. The metrics
    compared are means over runs; the runs' mean lambda1 stands in for each run's."""
    return 2.0 * 4.0 * eps_tokens, 2.0 * 8.0 * eps_tokens / max(lambda1, 1e-300)


def mamba2_token_error(sh, tokens, depth, d_conv=4):
    """Relative float32 error of the tokens after `depth` Mamba-2 layers (both NumPy and PyTorch, and
    tokdyn, compute in float32). A layer's output element is reached through the roundings of its
    chained sums: the RMSNorm (d), in_proj (d), the causal conv (d_conv taps), the SSD (N for C.B,
    up to T tokens), the gated RMSNorm (di) and out_proj (di); the elementwise exp / softplus / SiLU
    round once each. Over `depth` layers the roundings add up, LAMBDA sqrt(depth n_layer) u32, where
    the depth map does not amplify perturbations of the normalised tokens (assumed over these few
    layers; the depth-spectra workload measures the map's exponents)."""
    n_layer = 2 * sh["d"] + d_conv + sh["N"] + tokens + 2 * sh["di"] + 8
    return roundoff(depth * n_layer, U32)


def gpt2_token_error(cfg, tokens, depth):
    """As mamba2_token_error for GPT-2 (float32 in tokdyn and PyTorch): per layer the two LayerNorms
    (d each), the QKV projection (d), the scores (d / heads), the attention-weighted sum (T), the output
    projection (d), the MLP's up (d) and down (4 d) projections, and a few elementwise roundings
    (softmax's exp, GELU)."""
    d, H = cfg["n_embd"], cfg["n_head"]
    n_layer = 5 * d + d // H + tokens + 4 * d + 8
    return roundoff(depth * n_layer, U32)


# ---- cocycle-spectra: the QR (Benettin) Lyapunov exponents, in double ----------------------------

def cocycle_bound(d, kappa):
    """Bound on max_k |mu_k(tokdyn) - mu_k(NumPy)|: both run the same Benettin loop, Z = B(l) Q,
    (Q, R) = qr(Z), mu_k = (1/L) sum_l log |R_kk(l)|, in double with Householder QR.

    Each layer's computed (Q, R) is the exact factorisation of a perturbed (B(l) + E(l)) Q with a
    relative ||E(l)|| of about LAMBDA sqrt(n) u64, n = d (the product's sums) + d^2 (a column meets
    up to d reflections of d terms each), i.e. about LAMBDA d u64. R_kk is the distance of B(l) q_k
    to the span of the previous columns, at least sigma_min(B(l)): it moves by at most 2 ||E|| /
    sigma_min, 2 eta kappa(B(l)) relative (kappa: the 2-norm condition number of the layer maps).
    mu_k averages these log-errors over the layers (assumed: the frames do not accumulate them, as for
    a cocycle whose exponents are separated), so each implementation is within 2 eta kappa, the two
    within 4 eta kappa."""
    return 4.0 * roundoff(d + d * d, U64) * kappa


def layer_condition(gen_file, samples=4):
    """The largest 2-norm condition number of `samples` layer maps spread over the generators file
    (the layers are i.i.d. draws of one law, B(l) = I + A_0 + delta E(l): their condition numbers
    concentrate)."""
    B = np.load(gen_file, mmap_mode="r")
    idx = np.unique(np.linspace(0, B.shape[0] - 1, samples).round().astype(int))
    return float(max(np.linalg.cond(np.asarray(B[i])) for i in idx))


# ---- green: the Green-operator BVP, a banded LU in double -----------------------------------------

def green_bound(gen_file, h_file, kappa_out=None):
    """Bound on max |u(tokdyn) - u(SciPy)| / max |u|: the same banded system M u = f (N = (L + 1) d
    unknowns, bandwidths lo = 2 d - k - 1 and up = d + k - 1), factorised by partial-pivoting LU
    (SciPy's dgbsv; tokdyn's block LU of the same rows), in double.

    Partial-pivoting LU is backward stable: the computed u solves (M + E) u = f with
    |E| <= (lo + up + 1)-term sums' round-off times the growth factor rho = max |U| / max |M|, so
    ||E||_inf <= LAMBDA sqrt(lo + up + 1) u64 rho ||M||_inf, and u is then within
    kappa_inf(M) ||E|| / ||M|| relative of the exact solution. The two implementations: twice that.
    kappa_inf(M) = ||M||_inf ||M^-1||_inf, the latter estimated by Higham's 1-norm estimator (as
    LAPACK's dgbcon) from dgbtrf's factors of the same matrix, assembled here from the files."""
    from scipy.linalg import lapack, schur
    from scipy.sparse.linalg import LinearOperator, onenormest

    B = np.load(gen_file)
    L, d, _ = B.shape
    _, Zl, k = schur(B[0], output="real", sort="ouc")  # E^u(B(0)): its first k Schur vectors
    _, Zr, kr = schur(B[-1].T, output="real", sort="ouc")
    if k != kr:
        return math.inf
    left, right = Zl[:, k:].T, Zr[:, :k].T  # the end rows, as bench/green_peer.py and tokdyn
    m = d - k
    N = (L + 1) * d
    lo, up = 2 * d - k - 1, d + k - 1
    ab = np.zeros((2 * lo + up + 1, N))  # dgbtrf's storage: lo extra rows for the fill

    def put(r0, c0, blk):
        rows, cols = blk.shape
        for j in range(cols):
            col = c0 + j
            ab[lo + up + r0 - col: lo + up + r0 - col + rows, col] = blk[:, j]

    row_sums = [np.abs(left).sum(axis=1).max(), np.abs(right).sum(axis=1).max()]
    put(0, 0, left)
    eye = np.eye(d)
    for l in range(L):
        put(m + l * d, l * d, -B[l])
        put(m + l * d, (l + 1) * d, eye)
    row_sums.append(float((np.abs(B).sum(axis=2) + 1.0).max()))
    put(m + L * d, L * d, right)
    norm_m = max(row_sums)
    max_m = max(float(np.abs(B).max()), 1.0, float(np.abs(left).max()), float(np.abs(right).max()))
    lu, piv, info = lapack.dgbtrf(ab, lo, up, overwrite_ab=1)
    if info != 0:
        return math.inf
    rho = float(np.abs(lu[:lo + up + 1]).max()) / max_m  # the rows of U (and the multipliers, <= 1)

    def solve(x, trans):
        y, inf = lapack.dgbtrs(lu, lo, up, np.asarray(x, float).reshape(-1), piv, trans=trans)
        return y

    # ||M^-1||_inf = ||M^-T||_1: the operator x -> M^-T x, its adjoint x -> M^-1 x.
    op = LinearOperator((N, N), matvec=lambda x: solve(x, 1), rmatvec=lambda x: solve(x, 0), dtype=float)
    kappa = norm_m * float(onenormest(op))
    if kappa_out is not None:
        kappa_out.update(kappa=kappa, rho=rho, lo=lo, up=up)
    return 2.0 * kappa * roundoff(lo + up + 1, U64) * max(rho, 1.0)


# ---- continuation: pseudo-arclength with Newton correctors ---------------------------------------

def continuation_bounds(steps, sup_u, L, tol_peer=1e-10, tol_tokdyn=1e-10):
    """Bounds on |d rho| and max_l |du(l)| / max_l |u(l)| after `steps` pseudo-arclength steps.

    Both correctors (bench/continuation_peer.py: tol = 1e-10; tokdyn's coupling-margin benchmark
    mode: o.tol = 1e-10) stop when the Newton update has sup_l |dw(l)| + |d rho| <= tol (1 + sup |w|);
    Newton converges quadratically, so the remaining error of the point is below that update. The
    next step starts from the computed point, so the errors add up along the path: after `steps`
    steps each implementation is within steps tol (1 + sup |w|) of the curve, in sup |dw| + |d rho|,
    with sup |w| <= 2 sup |u| (w = u minus the profile of u's own end states). That error also
    shifts the point along the curve by at most as much in arclength (the steps are measured in
    ||w||^2 / (L + 1) + rho^2), where |d rho / ds| <= 1 and sup_l |dw(l) / ds| <= sqrt(L + 1). The
    linear solves' round-off (kappa u, about 1e-13) is far below the Newton tolerances."""
    e = steps * (tol_peer + tol_tokdyn) * (1.0 + 2.0 * sup_u)
    return 2.0 * e, e * (1.0 + math.sqrt(L + 1.0)) / max(sup_u, 1e-300)
