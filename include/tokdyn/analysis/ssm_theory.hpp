#pragma once
// The theory of "The Attention Within" (arXiv 2609.17997), computed (§III–§V: Lemma III.1,
// Prop. IV.1, Thm IV.1, Section V, Lemma IV.1 and the linearisation at consensus). Umbrella
// include; each part has its own header:
//  * ssm_bounds.hpp          Lemma III.1 / Assumption III.1 channel bounds, assumption diagnostics
//  * ssm_pe_certificate.hpp  (6), Assumption IV.1 (PE), Lemma IV.2, Theorem IV.1's certificate, App. A
//  * ssm_section5.hpp        Section V: c_star, c_eff, Prop. V.1
//  * ssm_trajectory.hpp      (7)-(9), (24)-(28), linearisation at consensus, Definition III.1
//  * ssm_lemma_iv1.hpp       Lemma IV.1: positive bias of the SiLU kernel
#include "tokdyn/analysis/ssm_bounds.hpp"
#include "tokdyn/analysis/ssm_lemma_iv1.hpp"
#include "tokdyn/analysis/ssm_pe_certificate.hpp"
#include "tokdyn/analysis/ssm_section5.hpp"
#include "tokdyn/analysis/ssm_trajectory.hpp"
