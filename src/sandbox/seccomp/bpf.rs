//! A small classic-BPF assembler for seccomp programs: labels instead of counted offsets,
//! shared returns, search trees over a loaded value, and far jumps.
//!
//! Classic BPF jumps forward only, and a conditional jump reaches at most 255 instructions
//! ahead (`jt`/`jf` are one byte); only `BPF_JA` carries a 32-bit offset. Code here names
//! its targets; [`Asm::finish`] lays them out and routes a conditional jump whose target
//! lies too far through a `BPF_JA` placed right after it, so no emitter counts
//! instructions and no offset can silently wrap.

use libc::{
    sock_filter, BPF_ABS, BPF_ALU, BPF_AND, BPF_JA, BPF_JEQ, BPF_JGE, BPF_JGT, BPF_JMP, BPF_JSET,
    BPF_K, BPF_LD, BPF_MAXINSNS, BPF_RET, BPF_W,
};
use std::collections::BTreeMap;

/// A program point, bound once with [`Asm::bind`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Label(usize);

/// Where a jump goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Dest {
    /// The instruction that follows.
    Next,
    At(Label),
    /// A `BPF_RET` of this value, shared with every jump to it up to the next
    /// [`Asm::returns`] (or the program's end), where it is placed.
    Ret(u32),
}

/// A defect in the code handed to the assembler; never caused by input.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AsmError {
    #[error("a jump goes backwards or to a label bound nowhere")]
    Backward,
    #[error("a label is bound twice")]
    Rebound,
    #[error("the program is {0} instructions, more than the kernel takes")]
    TooLong(usize),
    #[error("search segments overlap or are out of order")]
    Segments,
}

#[derive(Clone, Copy, Debug)]
enum Item {
    Bind(Label),
    Load(u32),
    And(u32),
    Jump { op: u32, k: u32, jt: Dest, jf: Dest },
    Ja(Dest),
    Ret(u32),
    Returns,
}

/// A program under construction.
#[derive(Default)]
pub struct Asm {
    items: Vec<Item>,
    labels: usize,
}

/// A range of values `[lo, hi]` and where it goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub lo: u32,
    pub hi: u32,
    pub to: Dest,
}

impl Asm {
    pub fn label(&mut self) -> Label {
        self.labels += 1;
        Label(self.labels - 1)
    }

    pub fn bind(&mut self, label: Label) {
        self.items.push(Item::Bind(label));
    }

    /// Loads the 32-bit word at `offset` of `struct seccomp_data`.
    pub fn load(&mut self, offset: u32) {
        self.items.push(Item::Load(offset));
    }

    pub fn and(&mut self, mask: u32) {
        self.items.push(Item::And(mask));
    }

    fn jump(&mut self, op: u32, k: u32, jt: Dest, jf: Dest) {
        self.items.push(Item::Jump { op, k, jt, jf });
    }

    pub fn jeq(&mut self, k: u32, jt: Dest, jf: Dest) {
        self.jump(BPF_JEQ, k, jt, jf);
    }

    pub fn jge(&mut self, k: u32, jt: Dest, jf: Dest) {
        self.jump(BPF_JGE, k, jt, jf);
    }

    pub fn jgt(&mut self, k: u32, jt: Dest, jf: Dest) {
        self.jump(BPF_JGT, k, jt, jf);
    }

    /// Jumps to `jt` when the accumulator has any bit of `k`.
    pub fn jset(&mut self, k: u32, jt: Dest, jf: Dest) {
        self.jump(BPF_JSET, k, jt, jf);
    }

    /// Goes to `to` unconditionally: a return is placed inline, a label reached by `BPF_JA`.
    pub fn goto(&mut self, to: Dest) {
        match to {
            Dest::Next => {}
            Dest::Ret(k) => self.items.push(Item::Ret(k)),
            Dest::At(_) => self.items.push(Item::Ja(to)),
        }
    }

    /// Places the returns jumped to since the previous call, so that they stay near.
    pub fn returns(&mut self) {
        self.items.push(Item::Returns);
    }

    /// Sends the value in the accumulator to the segment holding it, or to `default`: a
    /// balanced binary search over the segments' bounds (`BPF_JGE`), so any value is placed
    /// after about log2(segments) + 1 comparisons. Adjacent segments going to the same
    /// place are merged first.
    pub fn search(&mut self, segments: &[Segment], default: Dest) -> Result<(), AsmError> {
        let mut merged: Vec<Segment> = Vec::with_capacity(segments.len());
        for s in segments {
            if s.lo > s.hi {
                return Err(AsmError::Segments);
            }
            match merged.last_mut() {
                Some(last) if last.hi >= s.lo => return Err(AsmError::Segments),
                Some(last) if last.to == s.to && last.hi + 1 == s.lo => last.hi = s.hi,
                _ => merged.push(*s),
            }
        }
        match trivial(&merged, 0, u32::MAX, default) {
            Some(to) => self.goto(to),
            None => self.tree(&merged, 0, u32::MAX, default),
        }
        Ok(())
    }

    /// Emits the search of `segs`, all within `[lo, hi]`, for a value known to lie in
    /// `[lo, hi]`; [`trivial`] is `None` for it.
    fn tree(&mut self, segs: &[Segment], lo: u32, hi: u32, default: Dest) {
        match segs {
            [] => self.goto(default),
            [s] => {
                if s.lo == s.hi {
                    self.jeq(s.lo, s.to, default);
                } else if s.lo == lo {
                    self.jgt(s.hi, default, s.to);
                } else if s.hi == hi {
                    self.jge(s.lo, s.to, default);
                } else {
                    let inside = self.label();
                    self.jge(s.lo, Dest::At(inside), default);
                    self.bind(inside);
                    self.jgt(s.hi, default, s.to);
                }
            }
            _ => {
                let mid = segs.len() / 2;
                let split = segs[mid].lo;
                let (left, right) = segs.split_at(mid);
                // `split` > `lo`: the left half holds a segment below it.
                let (left_hi, right_lo) = (split - 1, split);
                let left_to = trivial(left, lo, left_hi, default);
                let right_to = trivial(right, right_lo, hi, default);
                let right_label = self.label();
                self.jge(
                    split,
                    right_to.unwrap_or(Dest::At(right_label)),
                    left_to.unwrap_or(Dest::Next),
                );
                if left_to.is_none() {
                    self.tree(left, lo, left_hi, default);
                }
                if right_to.is_none() {
                    self.bind(right_label);
                    self.tree(right, right_lo, hi, default);
                }
            }
        }
    }

    /// Lays the program out: returns placed, labels resolved, far jumps routed through
    /// `BPF_JA`.
    pub fn finish(mut self) -> Result<Vec<sock_filter>, AsmError> {
        self.items.push(Item::Returns);
        let items = self.explicit();
        let items = relax(items, self.labels)?;
        let at = addresses(&items)?;
        let mut out = Vec::with_capacity(items.len());
        for item in &items {
            let pc = out.len();
            let offset = |to: Dest| -> Result<u32, AsmError> {
                match to {
                    Dest::At(l) => at
                        .get(&l)
                        .and_then(|t| t.checked_sub(pc + 1))
                        .and_then(|o| u32::try_from(o).ok())
                        .ok_or(AsmError::Backward),
                    _ => Err(AsmError::Backward),
                }
            };
            let insn = |code: u32, jt: u8, jf: u8, k: u32| sock_filter {
                code: code as u16,
                jt,
                jf,
                k,
            };
            out.push(match *item {
                Item::Bind(_) | Item::Returns => continue,
                Item::Load(k) => insn(BPF_LD | BPF_W | BPF_ABS, 0, 0, k),
                Item::And(k) => insn(BPF_ALU | BPF_AND | BPF_K, 0, 0, k),
                Item::Ret(k) => insn(BPF_RET | BPF_K, 0, 0, k),
                Item::Ja(to) => insn(BPF_JMP | BPF_JA, 0, 0, offset(to)?),
                Item::Jump { op, k, jt, jf } => {
                    let short = |to| {
                        offset(to).and_then(|o| u8::try_from(o).map_err(|_| AsmError::Backward))
                    };
                    insn(BPF_JMP | op | BPF_K, short(jt)?, short(jf)?, k)
                }
            });
        }
        if out.len() > BPF_MAXINSNS as usize {
            return Err(AsmError::TooLong(out.len()));
        }
        Ok(out)
    }

    /// Rewrites every `Next` and `Ret` target as a label, placing the returns.
    fn explicit(&mut self) -> Vec<Item> {
        let mut out = Vec::with_capacity(self.items.len() + 16);
        let mut pending: BTreeMap<u32, Label> = BTreeMap::new();
        let items = std::mem::take(&mut self.items);
        for item in items {
            match item {
                Item::Jump { op, k, jt, jf } => {
                    let next = self.label();
                    let mut fix = |to: Dest| match to {
                        Dest::Next => Dest::At(next),
                        Dest::Ret(k) => Dest::At(*pending.entry(k).or_insert_with(|| {
                            self.labels += 1;
                            Label(self.labels - 1)
                        })),
                        at => at,
                    };
                    let (jt, jf) = (fix(jt), fix(jf));
                    out.extend([Item::Jump { op, k, jt, jf }, Item::Bind(next)]);
                }
                Item::Ja(Dest::Next) => {}
                Item::Ja(Dest::Ret(k)) => out.push(Item::Ret(k)),
                Item::Returns => {
                    for (k, label) in std::mem::take(&mut pending) {
                        out.extend([Item::Bind(label), Item::Ret(k)]);
                    }
                }
                other => out.push(other),
            }
        }
        out
    }
}

/// The one place a search of `segs` within `[lo, hi]` goes without a comparison, if any.
fn trivial(segs: &[Segment], lo: u32, hi: u32, default: Dest) -> Option<Dest> {
    match segs {
        [] => Some(default),
        [s] if s.lo == lo && s.hi == hi => Some(s.to),
        _ => None,
    }
}

/// Each label's instruction index, by label number (labels are numbered densely from 0).
struct Addresses(Vec<Option<usize>>);

impl Addresses {
    fn get(&self, label: &Label) -> Option<&usize> {
        self.0.get(label.0).and_then(Option::as_ref)
    }
}

fn addresses(items: &[Item]) -> Result<Addresses, AsmError> {
    let mut at: Vec<Option<usize>> = Vec::new();
    let mut pc = 0;
    for item in items {
        match item {
            Item::Bind(l) => {
                if at.len() <= l.0 {
                    at.resize(l.0 + 1, None);
                }
                if at[l.0].replace(pc).is_some() {
                    return Err(AsmError::Rebound);
                }
            }
            Item::Returns => {}
            _ => pc += 1,
        }
    }
    Ok(Addresses(at))
}

/// Routes each conditional jump that cannot reach its target through a `BPF_JA` right
/// after it, until every one can (each insertion lengthens only jumps that cross it).
fn relax(mut items: Vec<Item>, mut next_label: usize) -> Result<Vec<Item>, AsmError> {
    loop {
        let at = addresses(&items)?;
        let mut out = Vec::with_capacity(items.len());
        let mut changed = false;
        let mut pc = 0;
        for item in items {
            let Item::Jump { op, k, jt, jf } = item else {
                if !matches!(item, Item::Bind(_) | Item::Returns) {
                    pc += 1;
                }
                out.push(item);
                continue;
            };
            let far = |to: Dest| match to {
                Dest::At(l) => at.get(&l).is_some_and(|t| t.saturating_sub(pc + 1) > 255),
                _ => false,
            };
            let mut trampolines = Vec::new();
            let mut route = |to: Dest| {
                if far(to) {
                    let via = Label(next_label);
                    next_label += 1;
                    trampolines.extend([Item::Bind(via), Item::Ja(to)]);
                    Dest::At(via)
                } else {
                    to
                }
            };
            let (jt, jf) = (route(jt), route(jf));
            changed |= !trampolines.is_empty();
            out.push(Item::Jump { op, k, jt, jf });
            out.extend(trampolines);
            pc += 1;
        }
        items = out;
        if !changed {
            return Ok(items);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Follows `prog` for an accumulator holding `value` (loaded by the first instruction).
    fn eval(prog: &[sock_filter], value: u32) -> u32 {
        let mut pc = 0;
        loop {
            let i = prog[pc];
            pc += 1;
            let code = u32::from(i.code);
            if code == BPF_RET | BPF_K {
                return i.k;
            }
            if code == BPF_JMP | BPF_JA {
                pc += i.k as usize;
                continue;
            }
            if code & 0x07 == BPF_LD {
                continue;
            }
            let taken = match code & 0xf0 {
                BPF_JEQ => value == i.k,
                BPF_JGE => value >= i.k,
                BPF_JGT => value > i.k,
                other => panic!("op {other:#x}"),
            };
            pc += usize::from(if taken { i.jt } else { i.jf });
        }
    }

    #[test]
    fn a_search_places_every_value_in_its_segment() {
        let points = [0u32, 5, 6, 7, 100, 101, 300, 0xffff_fffe];
        let mut asm = Asm::default();
        asm.load(0);
        let segs: Vec<Segment> = points
            .iter()
            .enumerate()
            .map(|(n, &p)| Segment {
                lo: p,
                hi: if p == 300 { 400 } else { p },
                to: Dest::Ret(n as u32 % 3 + 10),
            })
            .collect();
        assert_eq!(asm.search(&segs, Dest::Ret(1)), Ok(()));
        let prog = asm.finish().unwrap();
        for v in (0..1000).chain([0xffff_fffd, 0xffff_fffe, u32::MAX]) {
            let want = segs
                .iter()
                .find(|s| (s.lo..=s.hi).contains(&v))
                .map_or(Dest::Ret(1), |s| s.to);
            assert_eq!(Dest::Ret(eval(&prog, v)), want, "{v}");
        }
    }

    #[test]
    fn far_targets_are_reached_through_a_long_jump() {
        let mut asm = Asm::default();
        let far = asm.label();
        asm.load(0);
        asm.jeq(7, Dest::At(far), Dest::Next);
        for _ in 0..300 {
            asm.goto(Dest::Ret(1));
        }
        asm.bind(far);
        asm.goto(Dest::Ret(2));
        let prog = asm.finish().unwrap();
        assert_eq!(eval(&prog, 7), 2);
        assert_eq!(eval(&prog, 8), 1);
        assert!(prog.iter().any(|i| u32::from(i.code) == BPF_JMP | BPF_JA));
    }

    /// A small deterministic generator (xorshift64*): the tests need many varied layouts,
    /// not cryptographic randomness, and must fail the same way every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Random disjoint sorted segments: points and ranges, some touching, some at 0 or at
    /// u32::MAX, each going to a shared return or to a labelled block of its own.
    fn random_segments(rng: &mut Rng, asm: &mut Asm, count: usize) -> Vec<(Segment, u32)> {
        let mut out = Vec::new();
        let mut at: u64 = if rng.below(4) == 0 {
            0
        } else {
            rng.below(1000)
        };
        for n in 0..count {
            if at > u64::from(u32::MAX) {
                break;
            }
            let width = match rng.below(4) {
                0 | 1 => 0,
                2 => rng.below(8),
                _ => rng.below(1 << 20),
            };
            let hi = (at + width).min(u64::from(u32::MAX));
            let (to, answer) = if rng.below(3) == 0 {
                (Dest::At(asm.label()), 1000 + n as u32)
            } else {
                let k = 10 + rng.below(4) as u32;
                (Dest::Ret(k), k)
            };
            out.push((
                Segment {
                    lo: at as u32,
                    hi: hi as u32,
                    to,
                },
                answer,
            ));
            // Touching (same or other destination), a gap of one, or a wide gap.
            at = hi
                + 1
                + match rng.below(4) {
                    0 => 0,
                    1 => 1,
                    2 => rng.below(16),
                    _ => rng.below(1 << 24),
                };
            if rng.below(50) == 0 {
                at = u64::from(u32::MAX) - rng.below(3);
            }
        }
        out
    }

    /// Searches over random segments, padded so that jumps from the tree to its shared
    /// returns and to the blocks lie far beyond a byte's reach, place every value as a
    /// linear scan of the segments does: at each bound, one either side of it, and
    /// elsewhere.
    #[test]
    fn random_searches_with_far_targets_place_every_value_in_its_segment() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for round in 0..300 {
            let mut asm = Asm::default();
            asm.load(0);
            let count = 1 + rng.below(if round % 10 == 0 { 400 } else { 60 }) as usize;
            let segments = random_segments(&mut rng, &mut asm, count);
            let segs: Vec<Segment> = segments.iter().map(|(s, _)| *s).collect();
            assert_eq!(asm.search(&segs, Dest::Ret(1)), Ok(()));
            // Shared returns right after the tree, or only at the very end (far).
            if rng.below(2) == 0 {
                asm.returns();
            }
            let pad = rng.below(3) as usize * 150;
            for (s, answer) in &segments {
                if let Dest::At(label) = s.to {
                    asm.bind(label);
                    for _ in 0..pad / segments.len().max(1) + rng.below(3) as usize {
                        asm.load(0);
                    }
                    asm.goto(Dest::Ret(*answer));
                }
            }
            let prog = match asm.finish() {
                Ok(prog) => prog,
                Err(AsmError::TooLong(_)) => continue,
                Err(e) => panic!("round {round}: {e}"),
            };
            let want = |v: u32| {
                segments
                    .iter()
                    .find(|(s, _)| (s.lo..=s.hi).contains(&v))
                    .map_or(1, |(_, answer)| *answer)
            };
            let mut values = vec![0, 1, u32::MAX, u32::MAX - 1];
            for (s, _) in &segments {
                for v in [s.lo, s.hi] {
                    values.extend([v, v.wrapping_add(1), v.wrapping_sub(1)]);
                }
                values.push(s.lo + (s.hi - s.lo) / 2);
            }
            values.extend((0..200).map(|_| rng.next() as u32));
            for v in values {
                assert_eq!(eval(&prog, v), want(v), "round {round}: value {v:#x}");
            }
        }
    }

    /// Every instruction's jump lands inside the program, and every path ends in a return:
    /// what the kernel's checker asks of a classic BPF program.
    #[test]
    fn far_jumps_are_routed_through_trampolines_that_land_inside_the_program() {
        let mut asm = Asm::default();
        asm.load(0);
        let labels: Vec<Label> = (0..40).map(|_| asm.label()).collect();
        // Forty comparisons, each jumping to a block further away than the one before.
        for (n, l) in labels.iter().enumerate() {
            asm.jeq(n as u32, Dest::At(*l), Dest::Next);
        }
        asm.goto(Dest::Ret(1));
        for (n, l) in labels.iter().enumerate() {
            asm.bind(*l);
            for _ in 0..20 {
                asm.load(0);
            }
            asm.goto(Dest::Ret(100 + n as u32));
        }
        let prog = asm.finish().unwrap();
        for (pc, i) in prog.iter().enumerate() {
            let code = u32::from(i.code);
            if code & 0x07 == BPF_JMP {
                let targets = if code == BPF_JMP | BPF_JA {
                    vec![pc + 1 + i.k as usize]
                } else {
                    vec![pc + 1 + usize::from(i.jt), pc + 1 + usize::from(i.jf)]
                };
                assert!(targets.iter().all(|t| *t < prog.len()), "{pc}");
            }
        }
        assert_eq!(
            prog.last().map(|i| u32::from(i.code)),
            Some(BPF_RET | BPF_K)
        );
        for n in 0..45u32 {
            let want = if n < 40 { 100 + n } else { 1 };
            assert_eq!(eval(&prog, n), want, "{n}");
        }
    }

    #[test]
    fn a_backward_jump_is_refused() {
        let mut asm = Asm::default();
        let back = asm.label();
        asm.bind(back);
        asm.load(0);
        asm.jeq(1, Dest::At(back), Dest::Ret(0));
        assert_eq!(asm.finish().err(), Some(AsmError::Backward));
    }
}
