# Type stubs of the package tokdyn (the documented interface; see docs/python.md).
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Literal, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt
import pandas as pd

__version__: str

ArrayF = npt.NDArray[np.float64]
PathLike = Union[str, os.PathLike[str]]

class Error(Exception):
    exit_code: int
class InternalError(Error, RuntimeError): ...
class InputError(Error, ValueError): ...
class ResourceError(Error, RuntimeError): ...
class NonFiniteError(Error, RuntimeError): ...
class FiguresError(Error, RuntimeError): ...
class BusyError(Error, RuntimeError): ...
class ConvergenceError(Error, RuntimeError): ...

def presets() -> List[Dict[str, str]]:
    """The named experiments (name, description): `tokdyn presets`."""
def show(preset: str) -> Dict[str, Any]:
    """A preset's parameters and declared outputs: `tokdyn show PRESET --json`."""
def run(preset: str, out: Optional[PathLike] = ..., *, threads: int = ..., figures: bool = ..., overwrite: bool = ...,
        inputs: bool = ..., **params: Any) -> Result:
    """Runs a preset in-process (the CLI's validation; the same bytes) and returns its results. Without
    `out`, a temporary folder removed with the Result (Result.keep() keeps it). Ctrl-C raises
    KeyboardInterrupt and leaves nothing of the run."""
def load(path: PathLike) -> Result:
    """Opens a results folder."""

class Taps:
    axes: Tuple[str, str, str, str]  # ("layer", "run", "row", "d")
    layers: List[int]
    array: ArrayF  # [layer, run, row, d]
    def at(self, layer: int) -> ArrayF: ...

class Result:
    dir: Path
    manifest: Dict[str, Any]
    preset: str
    @property
    def temporary(self) -> bool:
        """True for the folder of run() without out=, removed when the Result is garbage-collected."""
    def keep(self) -> Path:
        """Keeps that folder; returns dir."""
    @property
    def params(self) -> Dict[str, Any]: ...
    @property
    def table_names(self) -> List[str]: ...
    @property
    def tables(self) -> Dict[str, pd.DataFrame]: ...
    @property
    def summaries(self) -> Optional[pd.DataFrame]: ...
    @property
    def checks(self) -> Optional[pd.DataFrame]: ...
    def table(self, name: str) -> pd.DataFrame: ...
    def describe(self, name: str) -> Optional[Dict[str, Any]]: ...
    def array(self, path: str) -> np.ndarray: ...
    def variants(self) -> List[str]: ...
    def taps(self, variant: Optional[str] = ...) -> Taps: ...
    def __getitem__(self, name: str) -> pd.DataFrame: ...
    def __getattr__(self, name: str) -> pd.DataFrame: ...

def sweep(preset: str, out: Optional[PathLike] = ..., *, grid: Optional[Mapping[str, Any]] = ..., zip: Optional[Mapping[str, Any]] = ...,
          points: Any = ..., jobs: int = ..., threads: int = ..., figures: bool = ..., plot: Union[None, str, Sequence[str]] = ...,
          overwrite: bool = ..., quiet: bool = ..., **params: Any) -> pd.DataFrame:
    """`tokdyn sweep`: the cartesian product of `grid`, the `zip`ped axis and the `points` rows; returns
    sweep.csv (one row per point: parameters, status, exit_code, error, summaries, check verdicts)."""
def load_sweep(path: PathLike) -> pd.DataFrame:
    """A sweep's sweep.csv (exact doubles; attrs["dir"] the folder)."""

def model_names() -> List[str]: ...
SCHEDULE_KNOBS: Dict[str, Tuple[str, ...]]

class Model:
    name: str
    def __init__(self, name: str, **knobs: Any) -> None: ...
    @property
    def knobs(self) -> Dict[str, str]: ...
    @property
    def tap_names(self) -> List[str]: ...
    @property
    def on_sphere(self) -> bool: ...
    @property
    def notes(self) -> Dict[str, Any]: ...
    @property
    def x0(self) -> ArrayF:
        """The start state [rows, d]."""
    def step(self, X: npt.ArrayLike, layer: int) -> ArrayF:
        """X(layer) from X(layer - 1): [rows, d] or [runs, rows, d]."""
    def jvp(self, X: npt.ArrayLike, V: npt.ArrayLike, layer: int) -> ArrayF:
        """D step(X, layer) applied to k tangents V [k, rows, d]."""
    def trajectory(self, X0: Optional[npt.ArrayLike] = ..., depth: int = ..., taps: Union[str, Sequence[int]] = ...,
                   schedule: Optional[Mapping[str, Any]] = ...) -> Dict[int, ArrayF]: ...
    def hidden_states(self, token_ids: Optional[Sequence[int]] = ..., depth: int = ..., taps: Union[str, Sequence[int]] = ...,
                      X0: Optional[npt.ArrayLike] = ..., **switches: Any) -> ArrayF:
        """[taps, runs, tokens, d], like Hugging Face's output_hidden_states."""
    def attentions(self, token_ids: Optional[npt.ArrayLike] = ..., depth: Optional[int] = ..., X0: Optional[npt.ArrayLike] = ...,
                   heads: Optional[Sequence[int]] = ...) -> ArrayF:
        """[depth, runs, heads, tokens, tokens], like Hugging Face's output_attentions."""
    def tap(self, name: str, X: npt.ArrayLike, layer: int, heads: Sequence[int] = ...) -> ArrayF:
        """An internal quantity of layer `layer` at the state X entering it (tap_names)."""

class _Models:
    """The registry's models (generated by scripts/gen_pyi.py from `tokdyn models`; do not edit by hand)."""
    def __getattr__(self, name: str) -> Callable[..., Model]: ...
    def describe(self, name: str) -> Dict[str, Any]: ...
    def ssm(self, *, n: int = ..., m: int = ..., tau: float = ..., weights: Literal['mamba2', 'gaussian'] = ...,
            sigma: float = ..., silu: bool = ..., redraw: int = ..., form: Literal['io', 'recurrence'] = ...,
            tokens: int = ..., seed: int = ..., depth: int = ...) -> Model:
        """The Attention Within (1)-(2): the selective SSM layer on spheres, random zero-mean weights (as ssm-random-silu)

        n: token dimension n
        m: hidden-state size per channel
        tau: step of the normalised update (2)
        weights: random weight distribution
        sigma: standard deviation for weights=gaussian
        silu: SiLU on the B and C branches
        redraw: weights redrawn every this many layers (>= depth: one weight-tied layer)
        form: which exact form computes the layer: input-output (io) or the recurrence
        tokens: tokens per sequence
        seed: seed of the start tokens and random weights
        depth: layers the model is built for (untied random Transformer weights)
        """
    def rope(self, *, d: int = ..., beta: float = ..., h: float = ..., rope: bool = ..., causal: bool = ...,
             heads: int = ..., freqs: Sequence[float] = ..., positions: Sequence[float] = ...,
             init: Literal['sphere', 'hemisphere'] = ..., tokens: int = ..., seed: int = ...,
             depth: int = ...) -> Model:
        """Self-Attention Dynamics with RoPE, step (3): x_i <- pi(x_i + h y_i), softmax attention with rotary queries and keys

        d: token dimension (even with RoPE)
        beta: inverse temperature
        h: residual step h of (3)
        rope: rotate queries and keys
        causal: causal mask
        heads: attention heads
        freqs: frequencies per plane (empty: standard)
        positions: token positions (empty: 0..T-1)
        init: initial tokens uniform on the sphere or in the hemisphere x_1 >= 0
        tokens: tokens per sequence
        seed: seed of the start tokens and random weights
        depth: layers the model is built for (untied random Transformer weights)
        """
    def mamba2(self, *, tau: float = ..., checkpoint: PathLike = ...,
               size: Literal['tiny', 'small', '130m', '370m', '780m', '1.3b', '2.7b'] = ..., model_seed: int = ...,
               layers: Literal['cycle', 'single'] = ..., layer: int = ...,
               update: Literal['residual', 'sphere'] = ..., vocab: int = ..., token_ids: PathLike = ...,
               gate: bool = ..., silu_bc: bool = ..., silu_x: bool = ..., conv: bool = ..., d_skip: bool = ...,
               mixer_norm: bool = ..., prompt: str = ..., prompts: PathLike = ..., tokenizer: str = ...,
               add_special_tokens: bool = ..., tokens: int = ..., seed: int = ..., depth: int = ...) -> Model:
        """The Attention Within §II-B: the real Mamba-2 block from a checkpoint (fp32 state, exact double forward-mode tangents)

        tau: tau of update=sphere
        checkpoint: checkpoint directory (config.json + model.safetensors); empty: a freshly initialised model
        size: size of the freshly initialised model when no checkpoint is given
        model_seed: seed of the freshly initialised model (= tokdyn make-checkpoint --seed)
        layers: the model's blocks cycled, or one block repeated
        layer: the block of layers=single
        update: residual: the true residual stream; sphere: z <- pi(z + tau mixer(RMSNorm z))
        vocab: token ids drawn from [0, vocab); 0: the model's real vocabulary (50277 for the released models)
        token_ids: a .npy file of int token ids [runs, tokens] to use instead of random ids
        gate: the output gate (off: v = y)
        silu_bc: SiLU on the B and C channels
        silu_x: SiLU on the x channels after the conv
        conv: causal depthwise conv (off: identity conv)
        d_skip: the D x skip term
        mixer_norm: the gated RMSNorm
        prompt: a text to start from, encoded by the model's tokenizer: one run of the prompt's tokens
        prompts: a text file of prompts, one per line, one run each; all must encode to the same number of tokens
        tokenizer: the tokenizer.json (or a folder holding one) that encodes prompt / prompts; default: the checkpoint's
        add_special_tokens: prompt / prompts: add the tokenizer's special tokens (its BOS / EOS template)
        tokens: tokens per sequence
        seed: seed of the start tokens and random weights
        depth: layers the model is built for (untied random Transformer weights)
        """
    def transformer(self, *, d: int = ..., heads: int = ..., d_ff: int = ..., sigma_w: float = ...,
                    sigma_b: float = ..., norm: Literal['rms', 'layer', 'none'] = ..., eps: float = ...,
                    placement: Literal['pre', 'post'] = ...,
                    activation: Literal['gelu', 'gelu-tanh', 'silu', 'tanh', 'relu'] = ...,
                    mask: Literal['causal', 'bidirectional', 'block', 'sliding', 'leaky'] = ..., block: int = ...,
                    window: int = ..., eps_leak: float = ..., positional: Literal['none', 'rope', 'alibi'] = ...,
                    temperature: float = ..., tying: Literal['untied', 'tied', 'looped'] = ..., loop: int = ...,
                    tf_weights: PathLike = ..., tokens: int = ..., seed: int = ..., depth: int = ...) -> Model:
        """Coupling paper block (4): the Transformer depth map (Pre/Post-LN, RMS/LayerNorm, masks, RoPE/ALiBi), seeded or from a weights file

        d: token dimension (= d_k = d_v)
        heads: attention heads (must divide d)
        d_ff: MLP width
        sigma_w: weight std x sqrt(fan_in) (random weights only)
        sigma_b: bias std (b_1, b_2) (random weights only)
        norm: norm S
        eps: eps_S of the norm
        placement: norm placement
        activation: MLP activation phi (relu is not C^1: warned)
        mask: attention mask
        block: block length (mask = block)
        window: sliding window w (mask = sliding)
        eps_leak: weight of future tokens (mask = leaky)
        positional: positional scheme
        temperature: softmax temperature tau (0 = sqrt(d/heads))
        tying: weights across depth
        loop: period of a looped stack (tying = looped, random weights)
        tf_weights: safetensors file of layers.{l}.W_Q ... (empty: seeded random weights)
        tokens: tokens per sequence
        seed: seed of the start tokens and random weights
        depth: layers the model is built for (untied random Transformer weights)
        """
    def hierarchical(self, *, d: int = ..., heads: int = ..., d_ff: int = ..., sigma_w: float = ...,
                     sigma_b: float = ..., norm: Literal['rms', 'layer', 'none'] = ..., eps: float = ...,
                     placement: Literal['pre', 'post'] = ...,
                     activation: Literal['gelu', 'gelu-tanh', 'silu', 'tanh', 'relu'] = ...,
                     positional: Literal['none', 'rope', 'alibi'] = ..., temperature: float = ...,
                     tying: Literal['untied', 'tied', 'looped'] = ..., loop: int = ..., tf_weights: PathLike = ...,
                     block: int = ..., rho: float = ..., compression: Literal['mean', 'stride', 'head', 'topk'] = ...,
                     topk: int = ..., injection: Literal['identity', 'linear', 'affine', 'tanh-mlp'] = ...,
                     psi_hidden: int = ..., psi_scale: float = ..., refresh_every: int = ...,
                     refresh: Literal['hold', 'relax'] = ..., pooled: Literal['raw', 'normalised'] = ...,
                     slow_loop: Literal['chain', 'self'] = ..., site: Literal['additive', 'inside'] = ...,
                     tokens: int = ..., seed: int = ..., depth: int = ...) -> Model:
        """Coupling paper eq. (11): the Transformer with block-local attention (C1) and the gated slow path of block summaries (C2)

        d: token dimension (= d_k = d_v)
        heads: attention heads (must divide d)
        d_ff: MLP width
        sigma_w: weight std x sqrt(fan_in) (random weights only)
        sigma_b: bias std (b_1, b_2) (random weights only)
        norm: norm S
        eps: eps_S of the norm
        placement: norm placement
        activation: MLP activation phi (relu is not C^1: warned)
        positional: positional scheme
        temperature: softmax temperature tau (0 = sqrt(d/heads))
        tying: weights across depth
        loop: period of a looped stack (tying = looped, random weights)
        tf_weights: safetensors file of layers.{l}.W_Q ... (empty: seeded random weights)
        block: block length P of the block-local attention (C1) and of the compressions (C2)
        rho: gate amplitude rho of the slow path's injection
        compression: compression Pi of a block (Remark 4)
        topk: tokens averaged by the top-k selector
        injection: injection psi
        psi_hidden: hidden width of the tanh-MLP psi
        psi_scale: scale of psi's random weights
        refresh_every: summaries refreshed every this many layers (0: held for the whole pass)
        refresh: sample-and-hold refresh or the continuous relaxation (12)
        pooled: pooled quantity: the raw stream x or the normalised S(x) (flag F9)
        slow_loop: block k reads the summary of block k-1 (chain) or its own (self, eq. (15))
        site: injection site: additive (eq. (11)) or inside the norms' argument (Pre-LN only)
        tokens: tokens per sequence
        seed: seed of the start tokens and random weights
        depth: layers the model is built for (untied random Transformer weights)
        """
    def gpt2(self, *, checkpoint: PathLike = ..., size: Literal['tiny', 'small', '124m'] = ..., model_seed: int = ...,
             layers: Literal['cycle', 'single'] = ..., layer: int = ..., update: Literal['residual', 'sphere'] = ...,
             tau: float = ..., vocab: int = ..., token_ids: PathLike = ..., use_positions: bool = ...,
             sublayers: Literal['both', 'attention', 'mlp'] = ..., beta: float = ...,
             qk: Literal['checkpoint', 'perturbed', 'random'] = ..., qk_sigma: float = ..., qk_from: int = ...,
             prompt: str = ..., prompts: PathLike = ..., tokenizer: str = ..., add_special_tokens: bool = ...,
             tokens: int = ..., seed: int = ..., depth: int = ...) -> Model:
        """GPT-2: learned positions, Pre-LN LayerNorm with bias, GELU-tanh MLP, fused Conv1D attention (Hugging Face layout) (GPT2LMHeadModel checkpoints; fp32 state, exact double tangents)

        checkpoint: checkpoint directory (config.json + model.safetensors); empty: a freshly initialised model
        size: size of the freshly initialised model when no checkpoint is given
        model_seed: seed of the freshly initialised model (= tokdyn make-checkpoint --seed)
        layers: the model's blocks cycled, or one block repeated
        layer: the block of layers=single
        update: residual: the true residual stream; sphere: z <- pi(z + tau (F(z) - z)), the layer's increment
        tau: tau of update=sphere
        vocab: token ids drawn from [0, vocab); 0: the model's vocab_size
        token_ids: a .npy file of int token ids [runs, tokens] to use instead of random ids
        use_positions: positional information: learned position rows (GPT-2) or the rotary rotation (NeoX, Llama)
        sublayers: the layer's branches: both, attention only (MLP off) or MLP only (attention off)
        beta: inverse temperature
        qk: W_Q and W_K as loaded, perturbed (+ qk_sigma rms(W) N(0,1)) or random (N(0, init_std^2))
        qk_sigma: relative size of the W_Q / W_K perturbation
        qk_from: first (0-based) layer whose W_Q and W_K are perturbed or replaced (0: every layer)
        prompt: a text to start from, encoded by the model's tokenizer: one run of the prompt's tokens
        prompts: a text file of prompts, one per line, one run each; all must encode to the same number of tokens
        tokenizer: the tokenizer.json (or a folder holding one) that encodes prompt / prompts; default: the checkpoint's
        add_special_tokens: prompt / prompts: add the tokenizer's special tokens (its BOS / EOS template)
        tokens: tokens per sequence
        seed: seed of the start tokens and random weights
        depth: layers the model is built for (untied random Transformer weights)
        """
    def llama(self, *, checkpoint: PathLike = ..., size: Literal['tiny', 'tiny-llama3', 'small'] = ...,
              model_seed: int = ..., layers: Literal['cycle', 'single'] = ..., layer: int = ...,
              update: Literal['residual', 'sphere'] = ..., tau: float = ..., vocab: int = ...,
              token_ids: PathLike = ..., use_positions: bool = ...,
              sublayers: Literal['both', 'attention', 'mlp'] = ..., beta: float = ...,
              qk: Literal['checkpoint', 'perturbed', 'random'] = ..., qk_sigma: float = ..., qk_from: int = ...,
              prompt: str = ..., prompts: PathLike = ..., tokenizer: str = ..., add_special_tokens: bool = ...,
              tokens: int = ..., seed: int = ..., depth: int = ...) -> Model:
        """Llama: RMSNorm, rotary (rope_theta, rope_scaling linear / llama3), grouped-query attention, SwiGLU MLP, no biases (LlamaForCausalLM checkpoints; fp32 state, exact double tangents)

        checkpoint: checkpoint directory (config.json + model.safetensors); empty: a freshly initialised model
        size: size of the freshly initialised model when no checkpoint is given
        model_seed: seed of the freshly initialised model (= tokdyn make-checkpoint --seed)
        layers: the model's blocks cycled, or one block repeated
        layer: the block of layers=single
        update: residual: the true residual stream; sphere: z <- pi(z + tau (F(z) - z)), the layer's increment
        tau: tau of update=sphere
        vocab: token ids drawn from [0, vocab); 0: the model's vocab_size
        token_ids: a .npy file of int token ids [runs, tokens] to use instead of random ids
        use_positions: positional information: learned position rows (GPT-2) or the rotary rotation (NeoX, Llama)
        sublayers: the layer's branches: both, attention only (MLP off) or MLP only (attention off)
        beta: inverse temperature
        qk: W_Q and W_K as loaded, perturbed (+ qk_sigma rms(W) N(0,1)) or random (N(0, init_std^2))
        qk_sigma: relative size of the W_Q / W_K perturbation
        qk_from: first (0-based) layer whose W_Q and W_K are perturbed or replaced (0: every layer)
        prompt: a text to start from, encoded by the model's tokenizer: one run of the prompt's tokens
        prompts: a text file of prompts, one per line, one run each; all must encode to the same number of tokens
        tokenizer: the tokenizer.json (or a folder holding one) that encodes prompt / prompts; default: the checkpoint's
        add_special_tokens: prompt / prompts: add the tokenizer's special tokens (its BOS / EOS template)
        tokens: tokens per sequence
        seed: seed of the start tokens and random weights
        depth: layers the model is built for (untied random Transformer weights)
        """
    def neox(self, *, checkpoint: PathLike = ...,
             size: Literal['tiny', 'tiny-sequential', 'small', 'pythia-70m', 'pythia-160m'] = ...,
             model_seed: int = ..., layers: Literal['cycle', 'single'] = ..., layer: int = ...,
             update: Literal['residual', 'sphere'] = ..., tau: float = ..., vocab: int = ...,
             token_ids: PathLike = ..., use_positions: bool = ...,
             sublayers: Literal['both', 'attention', 'mlp'] = ..., beta: float = ...,
             qk: Literal['checkpoint', 'perturbed', 'random'] = ..., qk_sigma: float = ..., qk_from: int = ...,
             prompt: str = ..., prompts: PathLike = ..., tokenizer: str = ..., add_special_tokens: bool = ...,
             tokens: int = ..., seed: int = ..., depth: int = ...) -> Model:
        """GPT-NeoX / Pythia: rotary on rotary_pct of each head, LayerNorm with bias, GELU MLP, parallel (or sequential) residual (GPTNeoXForCausalLM checkpoints; fp32 state, exact double tangents)

        checkpoint: checkpoint directory (config.json + model.safetensors); empty: a freshly initialised model
        size: size of the freshly initialised model when no checkpoint is given
        model_seed: seed of the freshly initialised model (= tokdyn make-checkpoint --seed)
        layers: the model's blocks cycled, or one block repeated
        layer: the block of layers=single
        update: residual: the true residual stream; sphere: z <- pi(z + tau (F(z) - z)), the layer's increment
        tau: tau of update=sphere
        vocab: token ids drawn from [0, vocab); 0: the model's vocab_size
        token_ids: a .npy file of int token ids [runs, tokens] to use instead of random ids
        use_positions: positional information: learned position rows (GPT-2) or the rotary rotation (NeoX, Llama)
        sublayers: the layer's branches: both, attention only (MLP off) or MLP only (attention off)
        beta: inverse temperature
        qk: W_Q and W_K as loaded, perturbed (+ qk_sigma rms(W) N(0,1)) or random (N(0, init_std^2))
        qk_sigma: relative size of the W_Q / W_K perturbation
        qk_from: first (0-based) layer whose W_Q and W_K are perturbed or replaced (0: every layer)
        prompt: a text to start from, encoded by the model's tokenizer: one run of the prompt's tokens
        prompts: a text file of prompts, one per line, one run each; all must encode to the same number of tokens
        tokenizer: the tokenizer.json (or a folder holding one) that encodes prompt / prompts; default: the checkpoint's
        add_special_tokens: prompt / prompts: add the tokenizer's special tokens (its BOS / EOS template)
        tokens: tokens per sequence
        seed: seed of the start tokens and random weights
        depth: layers the model is built for (untied random Transformer weights)
        """

models: _Models

def gram_metrics(X: npt.ArrayLike) -> Dict[str, ArrayF]:
    """lambda1, participation, min_cosine, consensus_dist_axes, consensus_dist_diagonal of X [..., tokens, d],
    each of shape X.shape[:-2] ([taps, runs] for hidden states; (1,) for one [tokens, d])."""
def pe_window(q: npt.ArrayLike) -> Dict[str, Any]:
    """W(T) of eq. (23) for T = 1..kappa and T* = min{T : W(T) > 0} (None: no admissible window)."""
def pe_readings(q: npt.ArrayLike) -> Dict[str, Any]:
    """T* per (run, token) of q [runs, tokens, depth] and the text / caption / envelope readings."""
def consensus_spectrum(positions: Sequence[float], freqs: Sequence[float], beta: float,
                       energies: Optional[Sequence[float]] = ..., method: str = ...) -> Dict[str, Any]:
    """Eigenvalues and gap of the consensus kernel (RoPE eqs. (13)-(14), Thm 7.3)."""
def green_solve(B: npt.ArrayLike, h: npt.ArrayLike, tails: str = ...) -> Dict[str, Any]:
    """The bounded solution u [L+1, d] of u(l+1) = B(l) u(l) + h(l) (Lemma 17), or why_not."""
def cocycle_spectra(B: npt.ArrayLike, k: int = ..., H: int = ..., burn_in: int = ..., *, bundles: bool = ...,
                    slack: float = ...) -> Dict[str, Any]:
    """Lyapunov exponents (discrete QR), Bohl intervals, dichotomy spectrum, hyperbolicity of B [L, d, d]."""
def depth_spectrum(model_or_step: Union[Model, Callable[[ArrayF, int], npt.ArrayLike]],
                   jvp: Optional[Callable[[ArrayF, ArrayF, int], npt.ArrayLike]] = ..., X0: Optional[npt.ArrayLike] = ...,
                   depth: int = ..., k: int = ..., *, burn_in: int = ..., on_sphere: bool = ..., seed: int = ...,
                   H: int = ..., V0: Optional[npt.ArrayLike] = ...) -> DepthSpectrum:
    """Top-k Lyapunov exponents and dichotomy intervals of a registry model or of Python callables."""

class DepthSpectrum:
    """depth_spectrum's result: every per-exponent field sorted largest first (qr_column: the QR order);
    `_log` fields on the log scale per layer, `_growth` fields growth scales e^(log) per layer."""
    exponents_log: ArrayF  # [k], descending
    exponents_growth: ArrayF  # [k]
    qr_column: npt.NDArray[np.int64]  # [k]
    running_log: ArrayF  # [depth - burn_in, k]
    per_layer_log: ArrayF  # [depth - burn_in, k]
    bohl_growth: ArrayF  # [k, 2]
    dichotomy_growth: ArrayF  # [m, 2], ascending
    hyperbolic: Literal["yes", "no", "undecided"]
    margin_log: float
    tolerance_log: float
    unresolved_from_layer: npt.NDArray[np.int64]  # [k], -1: resolved
    H: int
    depth: int
    burn_in: int
    k: int
    dim: int
    final_state: ArrayF  # [rows, d]
    manifest: Dict[str, Any]
    def keys(self) -> List[str]: ...
    def __getitem__(self, name: str) -> Any:
        """A field by name, or a key of the dict depth_spectrum returned before (mu, mu_running, ...: QR order)."""
    def __contains__(self, name: object) -> bool: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def save(self, dir: PathLike, overwrite: bool = ...) -> Path:
        """exponents.csv, running.csv, dichotomy.csv, final_state.npy and manifest.json, written beside
        `dir` and renamed into place; a previous tokdyn result replaced only with overwrite=True."""

ArrayI = npt.NDArray[np.int64]

class Encoding:
    """One encoded text: ids, pieces (vocabulary strings), special flags, unknown spans, texts (labels)."""
    @property
    def ids(self) -> ArrayI: ...
    @property
    def pieces(self) -> List[str]: ...
    @property
    def special(self) -> List[bool]: ...
    @property
    def unknown(self) -> List[str]: ...
    @property
    def texts(self) -> List[str]:
        """Each token decoded alone (Tokenizer.piece_text), for labels."""
    def __len__(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...

class Tokenizer:
    """A checkpoint's tokenizer.json, encoding and decoding as Hugging Face's tokenizers does."""
    @staticmethod
    def from_file(path: PathLike) -> Tokenizer:
        """A tokenizer.json, or a folder holding one."""
    @staticmethod
    def from_checkpoint(dir: PathLike) -> Tokenizer:
        """A checkpoint folder's tokenizer.json (ValueError "no tokenizer.json in DIR" when missing)."""
    @staticmethod
    def from_json(text: Union[str, bytes], name: str = ...) -> Tokenizer:
        """The text of a tokenizer.json; `name` is the source named in messages."""
    def encode(self, text: Union[str, bytes], add_special_tokens: bool = ...) -> Encoding: ...
    def encode_batch(self, texts: Sequence[Union[str, bytes]], add_special_tokens: bool = ..., threads: int = ...) -> List[Encoding]:
        """Encodes on `threads` threads (0: every core) without the GIL; the same as one by one."""
    def decode(self, ids: Union[Sequence[int], npt.NDArray[np.integer[Any]]], skip_special_tokens: bool = ...) -> str: ...
    def piece_text(self, id: int) -> str: ...
    def token_to_id(self, token: str) -> Optional[int]: ...
    def id_to_token(self, id: int) -> str: ...
    def is_special(self, id: int) -> bool: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def source(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def sha256(self) -> str: ...

def train(model: str, corpus: PathLike, steps: int, out: PathLike, *, size: str = ..., tokenizer: Optional[PathLike] = ...,
          seed: int = ..., threads: Optional[int] = ..., context: Optional[int] = ..., batch: Optional[int] = ...,
          lr: Optional[float] = ..., warmup: Optional[int] = ..., weight_decay: float = ..., eval_every: Optional[int] = ...,
          checkpoint_every: Optional[int] = ..., heldout_every: int = ..., overwrite: bool = ..., quiet: bool = ...) -> Dict[str, Any]:
    """Trains a model on a corpus into `out` (tokdyn train); returns the manifest."""
    ...
def train_tokenizer(corpus: PathLike, out: PathLike, vocab_size: int = ..., *, min_frequency: int = ...,
                    special: Optional[Sequence[str]] = ...) -> Dict[str, Any]:
    """A byte-level BPE tokenizer trained on `corpus`, written to `out` (tokdyn train-tokenizer)."""
    ...
