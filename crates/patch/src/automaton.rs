//! A suffix automaton over a file's line ids (one pass's keys): it says in
//! M steps how many times a block of M lines occurs in the whole file and
//! where it first starts.
//!
//! Guarantees: built in O(N) steps for N lines (at most 2N states and 3N
//! transitions, hash-map lookups), each step counted through the caller's
//! `tick`, so a deadline stops the build; a query never allocates. Memory
//! is a few flat arrays and one map of the transitions (no allocation per
//! state): about 100 bytes per line.

use std::collections::HashMap;

use crate::error::PatchError;

const NONE: u32 = u32::MAX;

/// The automaton of one id sequence.
pub(crate) struct Automaton {
    /// Transitions: (state, line id) → state.
    next: HashMap<(u32, u32), u32>,
    /// The labels of each state's transitions, as a linked list in
    /// `labels` (head index, `NONE` when it has none), for cloning.
    first_label: Vec<u32>,
    /// (line id, index of the next label of the same state).
    labels: Vec<(u32, u32)>,
    /// Suffix link of each state (`NONE` for the initial state).
    link: Vec<u32>,
    /// Length of the longest block of each state.
    len: Vec<u32>,
    /// Index of the last line of the first occurrence of each state's
    /// blocks.
    first_end: Vec<u32>,
    /// How many times each state's blocks occur.
    count: Vec<u32>,
}

impl Automaton {
    /// The automaton of `ids`; `tick` is called once per step.
    pub(crate) fn build(
        ids: &[u32],
        tick: &mut dyn FnMut() -> Result<(), PatchError>,
    ) -> Result<Self, PatchError> {
        let mut a = Self {
            next: HashMap::with_capacity(ids.len() * 2),
            first_label: vec![NONE],
            labels: Vec::with_capacity(ids.len() * 2),
            link: vec![NONE],
            len: vec![0],
            first_end: vec![0],
            count: vec![0],
        };
        let mut last = 0usize;
        for (i, &c) in ids.iter().enumerate() {
            tick()?;
            let end = u32::try_from(i).unwrap_or(NONE);
            let cur = a.push(a.len[last] + 1, end, 1);
            let mut p = last as u32;
            while p != NONE && !a.next.contains_key(&(p, c)) {
                tick()?;
                a.add(p, c, cur);
                p = a.link[p as usize];
            }
            if p == NONE {
                a.link[cur as usize] = 0;
            } else {
                let q = a.next[&(p, c)];
                if a.len[p as usize] + 1 == a.len[q as usize] {
                    a.link[cur as usize] = q;
                } else {
                    let clone = a.push(a.len[p as usize] + 1, a.first_end[q as usize], 0);
                    let mut label = a.first_label[q as usize];
                    while label != NONE {
                        tick()?;
                        let (id, after) = a.labels[label as usize];
                        let to = a.next[&(q, id)];
                        a.add(clone, id, to);
                        label = after;
                    }
                    a.link[clone as usize] = a.link[q as usize];
                    while p != NONE && a.next.get(&(p, c)) == Some(&q) {
                        tick()?;
                        a.next.insert((p, c), clone);
                        p = a.link[p as usize];
                    }
                    a.link[q as usize] = clone;
                    a.link[cur as usize] = clone;
                }
            }
            last = cur as usize;
        }
        // Occurrences flow down suffix links, longest states first
        // (a counting sort by length: lengths are at most N).
        let mut starts = vec![0usize; ids.len() + 2];
        for &len in &a.len {
            starts[len as usize + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut order = vec![0usize; a.len.len()];
        for (state, &len) in a.len.iter().enumerate() {
            order[starts[len as usize]] = state;
            starts[len as usize] += 1;
        }
        for &state in order.iter().rev() {
            tick()?;
            let link = a.link[state];
            if link != NONE {
                a.count[link as usize] += a.count[state];
            }
        }
        Ok(a)
    }

    /// A new transition `from --id--> to`.
    fn add(&mut self, from: u32, id: u32, to: u32) {
        self.next.insert((from, id), to);
        let index = u32::try_from(self.labels.len()).unwrap_or(NONE);
        self.labels.push((id, self.first_label[from as usize]));
        self.first_label[from as usize] = index;
    }

    fn push(&mut self, len: u32, first_end: u32, count: u32) -> u32 {
        self.first_label.push(NONE);
        self.link.push(NONE);
        self.len.push(len);
        self.first_end.push(first_end);
        self.count.push(count);
        u32::try_from(self.len.len() - 1).unwrap_or(NONE)
    }

    /// How many times the non-empty block `pattern` occurs, and the index
    /// where it first starts (meaningless when it does not occur).
    pub(crate) fn occurrences(&self, pattern: &[u32]) -> (u32, usize) {
        let mut state = 0u32;
        for &id in pattern {
            match self.next.get(&(state, id)) {
                Some(&to) => state = to,
                None => return (0, 0),
            }
        }
        let state = state as usize;
        (self.count[state], (self.first_end[state] as usize + 1).saturating_sub(pattern.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block of a small sequence: the count and first start agree
    /// with a direct scan.
    #[test]
    fn counts_and_first_starts_match_a_scan() {
        let seq = [0, 1, 0, 1, 1, 0, 2, 0, 1, 0, 1, 1, 1, 0];
        let a = Automaton::build(&seq, &mut || Ok(())).unwrap();
        for start in 0..seq.len() {
            for end in start + 1..=seq.len() {
                let pattern = &seq[start..end];
                let found: Vec<usize> = (0..=seq.len() - pattern.len())
                    .filter(|&s| &seq[s..s + pattern.len()] == pattern)
                    .collect();
                assert_eq!(a.occurrences(pattern), (found.len() as u32, found[0]), "{pattern:?}");
            }
        }
        assert_eq!(a.occurrences(&[3]).0, 0);
        assert_eq!(a.occurrences(&[2, 2]).0, 0);
    }
}
