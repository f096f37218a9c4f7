// The hierarchical model's slow path (C2) from the registry's knobs (models/hierarchical/setup.hpp).
#include "tokdyn/models/hierarchical/setup.hpp"

#include <cstdint>

#include <fmt/format.h>

#include "tokdyn/core/error.hpp"

namespace tokdyn::hier {

SlowPath slow_path_from(const Params& p, int d, double rho) {
  const long tokens = p.get_int("tokens"), block = p.get_int("block");
  if (block > tokens) throw InputError(fmt::format("parameter 'block' = {}: longer than the sequence (tokens = {})", block, tokens));
  SlowPath s;
  s.P = static_cast<int>(block);
  s.pi.kind = parse_pi(p.get_string("compression"));
  s.pi.topk = static_cast<int>(p.get_int("topk"));
  s.psi = make_injection(parse_psi(p.get_string("injection")), d, static_cast<int>(p.get_int("psi_hidden")), p.get_double("psi_scale"),
                         static_cast<std::uint64_t>(p.get_int("seed")));
  s.rho = rho;
  s.L_r = static_cast<int>(p.get_int("refresh_every"));
  s.refresh = parse_refresh(p.get_string("refresh"));
  s.pooled = parse_pooled(p.get_string("pooled"));
  s.loop = parse_loop(p.get_string("slow_loop"));
  s.site = parse_site(p.get_string("site"));
  return s;
}

}  // namespace tokdyn::hier
