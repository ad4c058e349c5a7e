"""Tree-LSTMs of Tai, Socher & Manning (2015) over whole batches of trees, level by level with static shapes.

Two cells (Tai et al. sec. 3; Chen et al. 2017 eqs. 4-9 write the N-ary one):
- Binary (N-ary, N = 2) Tree-LSTM over binarised constituency trees (SST): for node j with children
  l (left), r (right),
    i_j    = sigma(W^(i) x_j + U^(i)_l h_l + U^(i)_r h_r + b^(i))              (Tai eq. 9,  Chen eq. 4)
    f_jk   = sigma(W^(f) x_j + U^(f)_kl h_l + U^(f)_kr h_r + b^(f_k)), k in l, r (Tai eq. 10, Chen eq. 5)
    o_j, u_j likewise (sigma, tanh)                                              (Tai eqs. 11-12, Chen 6-7)
    c_j    = i_j * u_j + f_jl * c_l + f_jr * c_r                                (Tai eq. 13, Chen eq. 8)
    h_j    = o_j * tanh(c_j)                                                    (Tai eq. 14, Chen eq. 9)
  Leaves read their word (x_j) and have no children (h, c of absent children are 0); internal nodes
  of a constituency tree read no word (x_j = 0), as in Tai et al.'s constituency Tree-LSTM.
- Child-Sum Tree-LSTM over dependency trees (Tai eqs. 2-8): node j is word j, C(j) its dependents,
    h~_j = sum_k h_k;  i_j, o_j, u_j = sigma / sigma / tanh(W x_j + U h~_j + b);
    f_jk = sigma(W^(f) x_j + U^(f) h_k + b^(f));  c_j = i_j * u_j + sum_k f_jk * c_k;  h_j = o_j * tanh(c_j).

Batching (the DGL idea, done on device with static shapes): all nodes of a batch advance together,
one `lax.scan` step per tree level, each step gathering the children's states; steps past the batch's
deepest tree are skipped with `lax.cond`. The binary Tree-LSTM computes only each level's nodes (sorted
by height, static windows that shrink with the height: `binary_tree_lstm`); the Child-Sum one updates
every word at every level (cost (depth + 1) * B * T).
The functions are jitted (a no-op inside an outer jit), so that eager calls compile once, not op by op.

Binary-tree arrays (built by `data.tree_batching.binary_tree_arrays`) for a sentence of s words padded
to T: node ids 0..s-1 are the leaves (word i is node i); node s + j is internal node j (j < s - 1) in
post-order, so the root is internal node s - 2 (a one-word sentence's root is its leaf).
  tree_children [T - 1, 2] int32: node ids of internal node j's left and right child (-1: padding).
  tree_heights  [T - 1] int32: 1 + the larger height of the children (leaves have height 0; 0: padding).
These ids do not depend on T, so a batch padded longer gives exactly the same results.
"""
from __future__ import annotations

from typing import Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured.nn import masks


def binary_node(pre: jax.Array, h_children: jax.Array, c_children: jax.Array, u: jax.Array
                ) -> tuple[jax.Array, jax.Array]:
  """One N-ary Tree-LSTM transition (N = 2; Tai eqs. 9-14, Chen eqs. 4-9).

  Args:
    pre: [..., 5H] W x_j + b (gates i, f_l, f_r, o, u; just b for an internal constituency node).
    h_children, c_children: [..., 2, H] the left and right child's h and c (zeros for a leaf).
    u: [2H, 5H] the stacked U matrices: rows 0..H-1 multiply h_l, rows H..2H-1 multiply h_r.

  Returns:
    (h_j, c_j), each [..., H].
  """
  hidden = h_children.shape[-1]
  z = pre + h_children.reshape(h_children.shape[:-2] + (2 * hidden,)) @ u
  i, f_l, f_r, o, g = jnp.split(z, 5, axis=-1)
  c = (jax.nn.sigmoid(i) * jnp.tanh(g) + jax.nn.sigmoid(f_l) * c_children[..., 0, :]
       + jax.nn.sigmoid(f_r) * c_children[..., 1, :])
  return jax.nn.sigmoid(o) * jnp.tanh(c), c


def _gather_nodes(leaf: jax.Array, node: jax.Array, ids: jax.Array, lengths: jax.Array) -> jax.Array:
  """States of node ids [B, M, 2] from leaf [B, T, H] (ids < s) and internal node [B, M, H] (id s + j);
  zeros for ids < 0."""
  batch, steps, hidden = leaf.shape
  flat = ids.reshape(batch, -1)
  s = lengths[:, None]
  from_leaf = jnp.take_along_axis(leaf, jnp.clip(flat, 0, steps - 1)[..., None], axis=1)
  from_node = jnp.take_along_axis(node, jnp.clip(flat - s, 0, max(node.shape[1] - 1, 0))[..., None], axis=1)
  out = jnp.where((flat < s)[..., None], from_leaf, from_node)
  out = jnp.where((flat >= 0)[..., None], out, jnp.zeros((), leaf.dtype))
  return out.reshape(ids.shape + (hidden,))


def states_by_node_id(leaf_h: jax.Array, node_h: jax.Array, lengths: jax.Array) -> jax.Array:
  """Every node's state in node-id order (the order of the batch's `tree_labels`).

  Args:
    leaf_h: float [B, T, H] the leaves' states (node ids 0..s-1).
    node_h: float [B, T - 1, H] the internal nodes' states (node id s + j is internal node j).
    lengths: int [B] s, the words per sentence.

  Returns:
    float [B, 2T - 1, H]: row k is node k's state for k < 2s - 1, zero beyond (padding nodes).
  """
  lengths = jnp.asarray(lengths, jnp.int32)
  batch, steps, _ = leaf_h.shape
  ids = jnp.arange(max(2 * steps - 1, 0), dtype=jnp.int32)[None, :]
  ids = jnp.where(ids < 2 * lengths[:, None] - 1, ids, -1)  # -1: a padding node (zeros)
  return _gather_nodes(leaf_h, node_h, ids[..., None], lengths)[:, :, 0]


@jax.jit
def binary_tree_lstm(params: Mapping[str, jax.Array], x: jax.Array, lengths: jax.Array,
                     children: jax.Array, heights: jax.Array
                     ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """The binary Tree-LSTM over a batch of binarised trees, level by level.

  The batch's internal nodes are sorted by height; level h computes only its own nodes, through a static
  window of W_h = B * floor(T / (h + 1)) slots (a node of height h spans >= h + 1 words, so a sentence has
  at most floor(T / (h + 1)) of them). Levels are grouped in blocks [1, 2), [2, 4), [4, 8), ... of one
  `lax.scan` each with the block's first window, so a batch costs about B * T * log2(T) node updates
  (not B * T per level) and compiles log2(T) scan bodies. Levels past the deepest tree are skipped.

  Args:
    params: {'w': [E, 5H], 'u': [2H, 5H], 'b': [5H]} (gates i, f_l, f_r, o, u).
    x: float [B, T, E] word vectors; lengths int [B] (>= 1).
    children: int [B, T - 1, 2], heights int [B, T - 1] (module docstring).

  Returns:
    leaf_h [B, T, H] (zero at padding), node_h [B, T - 1, H] the internal nodes' h (zero at padding),
    root_h [B, H] the root's h.
  """
  lengths = jnp.asarray(lengths, jnp.int32)
  batch, steps, _ = x.shape
  w, u, b = params['w'], params['u'], params['b']
  hidden = u.shape[0] // 2
  word = masks.sequence_mask(lengths, steps)[..., None]
  zeros = jnp.zeros((batch, steps, 2, hidden), x.dtype)
  leaf_h, leaf_c = binary_node(x @ w + b, zeros, zeros, u)
  leaf_h = jnp.where(word, leaf_h, 0.0)
  leaf_c = jnp.where(word, leaf_c, 0.0)
  num_nodes = children.shape[1]
  node_h = jnp.zeros((batch, num_nodes, hidden), x.dtype)
  if num_nodes:
    heights = jnp.asarray(heights, jnp.int32).reshape(-1)
    children = jnp.asarray(children, jnp.int32)
    # One state table: leaves (B * T rows), internal nodes (B * M rows), a sink row for dead slots.
    leaves, nodes = batch * steps, batch * num_nodes
    sink = leaves + nodes
    row = jnp.arange(batch)[:, None, None]
    s = lengths[:, None, None]
    child_rows = jnp.where(children < s, row * steps + children, leaves + row * num_nodes + children - s)
    child_rows = jnp.where(children >= 0, child_rows, sink).reshape(nodes, 2)
    child_rows = jnp.concatenate([child_rows, jnp.full((1, 2), sink, jnp.int32)])  # slot `nodes`: dead
    own_rows = jnp.concatenate([leaves + jnp.arange(nodes), jnp.array([sink])])
    live = heights >= 1
    order = jnp.argsort(jnp.where(live, heights, num_nodes + 1), stable=True).astype(jnp.int32)
    sorted_heights = jnp.where(live, heights, num_nodes + 1)[order]
    levels = jnp.arange(num_nodes + 2)
    start = jnp.searchsorted(sorted_heights, levels, side='left').astype(jnp.int32)
    count = jnp.searchsorted(sorted_heights, levels, side='right').astype(jnp.int32) - start
    order = jnp.concatenate([order, jnp.full((nodes,), nodes, jnp.int32)])  # windows may run past the end
    deepest = jnp.max(heights)
    table_h = jnp.concatenate([leaf_h.reshape(leaves, hidden), jnp.zeros((nodes + 1, hidden), x.dtype)])
    table_c = jnp.concatenate([leaf_c.reshape(leaves, hidden), jnp.zeros((nodes + 1, hidden), x.dtype)])
    first = 1
    while first <= num_nodes:
      last = min(2 * first, num_nodes + 1)
      window = min(nodes, batch * max(steps // (first + 1), 1))

      def level(carry, height, window=window):
        def compute(carry):
          table_h, table_c = carry
          slots = jax.lax.dynamic_slice(order, (start[height],), (window,))
          slots = jnp.where(jnp.arange(window) < count[height], slots, nodes)
          kids = child_rows[slots]  # [W, 2]
          h_new, c_new = binary_node(jnp.broadcast_to(b, (window, b.shape[-1])), table_h[kids],
                                     table_c[kids], u)
          target = own_rows[slots]
          return table_h.at[target].set(h_new), table_c.at[target].set(c_new)

        return jax.lax.cond(height <= deepest, compute, lambda c: c, carry), None

      (table_h, table_c), _ = jax.lax.scan(level, (table_h, table_c), jnp.arange(first, last))
      first = last
    node_h = table_h[leaves:sink].reshape(batch, num_nodes, hidden)
    node_h = jnp.where(live.reshape(batch, num_nodes)[..., None], node_h, 0.0)
  root_ids = jnp.where(lengths > 1, lengths + lengths - 2, 0)[:, None, None]  # node id s + (s - 2)
  root_h = _gather_nodes(leaf_h, node_h, jnp.broadcast_to(root_ids, (batch, 1, 2))[..., :1], lengths)
  return leaf_h, node_h, root_h[:, 0, 0]


@jax.jit
def dependency_depths(heads: jax.Array, lengths: jax.Array) -> jax.Array:
  """Depth of every word in its dependency tree (root words 0): heads [B, T] (-1 = ROOT) -> int32 [B, T];
  -1 at padding and for words not connected to a root (a cycle, which a valid tree never has)."""
  heads = jnp.asarray(heads, jnp.int32)
  steps = heads.shape[-1]
  valid = masks.sequence_mask(lengths, steps)
  parent = jnp.where(valid & (heads >= 0) & (heads < steps), heads, -1)
  depth0 = jnp.where(valid & (heads < 0), 0, -1)

  def relax(_, depth):
    above = jnp.take_along_axis(depth, jnp.maximum(parent, 0), axis=-1)
    return jnp.where((parent >= 0) & (above >= 0), above + 1, depth)

  return jax.lax.fori_loop(0, steps, relax, depth0)


@jax.jit
def child_sum_tree_lstm(params: Mapping[str, jax.Array], x: jax.Array, lengths: jax.Array,
                        heads: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The Child-Sum Tree-LSTM over a batch of dependency trees, deepest level first (one `lax.scan`).

  Args:
    params: {'w': [E, 4H] (gates i, o, u, f), 'u': [H, 3H] (i, o, u), 'u_f': [H, H], 'b': [4H]}.
    x: float [B, T, E] word vectors; lengths int [B].
    heads: int [B, T] head of each word (-1 = ROOT; padding ignored).

  Returns:
    h [B, T, H] every word's h (zero at padding), root_h [B, H] the root word's h (the mean over root
    words when there are several, e.g. a parser run with single_root=False).
  """
  lengths = jnp.asarray(lengths, jnp.int32)
  heads = jnp.asarray(heads, jnp.int32)
  batch, steps, _ = x.shape
  w, u, u_f, b = params['w'], params['u'], params['u_f'], params['b']
  hidden = u_f.shape[0]
  valid = masks.sequence_mask(lengths, steps)
  depth = dependency_depths(heads, lengths)
  parent = jnp.where(valid & (heads >= 0) & (heads < steps), heads, -1)
  pre = x @ w + b
  pre_iou, pre_f = pre[..., :3 * hidden], pre[..., 3 * hidden:]
  parent_pre_f = jnp.take_along_axis(pre_f, jnp.maximum(parent, 0)[..., None], axis=1)  # W_f x_{head(k)} + b_f
  # Every word k sends (h_k, f_{head(k) k} * c_k) to segment batch * T + head(k); roots and padding to a spare one.
  segment = jnp.where(parent >= 0, jnp.arange(batch)[:, None] * steps + parent, batch * steps).reshape(-1)
  deepest = jnp.max(depth)

  def children_sum(v):
    return jax.ops.segment_sum(v.reshape(batch * steps, -1), segment, batch * steps + 1)[:-1].reshape(
        batch, steps, -1)

  def level(carry, d):
    def compute(carry):
      h, c = carry
      f = jax.nn.sigmoid(parent_pre_f + h @ u_f)  # f_{head(k) k}, Tai eq. 4
      z = pre_iou + children_sum(h) @ u
      i, o, g = jnp.split(z, 3, axis=-1)
      c_new = jax.nn.sigmoid(i) * jnp.tanh(g) + children_sum(f * c)
      h_new = jax.nn.sigmoid(o) * jnp.tanh(c_new)
      now = (depth == d)[..., None]
      return jnp.where(now, h_new, h), jnp.where(now, c_new, c)

    return jax.lax.cond(d <= deepest, compute, lambda c: c, carry), None

  h0 = jnp.zeros((batch, steps, hidden), x.dtype)
  (h, _), _ = jax.lax.scan(level, (h0, h0), jnp.arange(steps - 1, -1, -1))
  roots = (valid & (heads < 0)).astype(x.dtype)
  root_h = jnp.einsum('bt,btd->bd', roots, h) / jnp.maximum(jnp.sum(roots, -1), 1.0)[:, None]
  return h, root_h


class BinaryTreeLSTM(nn.Module):
  """Linen wrapper of `binary_tree_lstm`: params `w` [E, 5H], `u` [2H, 5H], `b` [5H]."""
  hidden_size: int

  @nn.compact
  def __call__(self, x, lengths, children, heights):
    """x [B, T, E], lengths [B], children [B, T - 1, 2], heights [B, T - 1] -> (leaf_h, node_h, root_h)."""
    hidden = self.hidden_size
    params = {'w': self.param('w', nn.initializers.lecun_normal(), (x.shape[-1], 5 * hidden)),
              'u': self.param('u', nn.initializers.lecun_normal(), (2 * hidden, 5 * hidden)),
              'b': self.param('b', nn.initializers.zeros, (5 * hidden,))}
    return binary_tree_lstm(params, x, lengths, children, heights)


class ChildSumTreeLSTM(nn.Module):
  """Linen wrapper of `child_sum_tree_lstm`: params `w` [E, 4H], `u` [H, 3H], `u_f` [H, H], `b` [4H]."""
  hidden_size: int

  @nn.compact
  def __call__(self, x, lengths, heads):
    """x [B, T, E], lengths [B], heads [B, T] -> (h [B, T, H], root_h [B, H])."""
    hidden = self.hidden_size
    params = {'w': self.param('w', nn.initializers.lecun_normal(), (x.shape[-1], 4 * hidden)),
              'u': self.param('u', nn.initializers.lecun_normal(), (hidden, 3 * hidden)),
              'u_f': self.param('u_f', nn.initializers.lecun_normal(), (hidden, hidden)),
              'b': self.param('b', nn.initializers.zeros, (4 * hidden,))}
    return child_sum_tree_lstm(params, x, lengths, heads)
