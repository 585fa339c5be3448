// ns-3 (3.37) half of the cross-check between our discrete-event simulator
// (crates/cm-sim + crates/cm-experiments) and ns-3.
//
// Scenario (must match experiments/scenarios/ns3-dumbbell-{1M,10M}.toml):
//
//   s0 --100M/1ms--+                          +--100M/1ms-- r0
//                  L ==== B / 58 ms ==== R
//   s1 --100M/1ms--+   DropTail, BDP bytes    +--100M/1ms-- r1
//
//   * end-to-end one-way delay 1 + 58 + 1 = 60 ms (RTT 120 ms plus
//     serialization and queueing);
//   * bottleneck queue (both directions) = B x 120 ms / 8 bytes, DropTail;
//   * access-link queues 100000 packets (never drop);
//   * two TCP NewReno bulk flows s0->r0, s1->r1, 20 s, goodput = bytes
//     delivered to the receiving application (PacketSink) / 20 s.
//
// Queue choice (exactly one BDP-sized queue at the bottleneck):
//   The traffic-control layer is UNINSTALLED on every device (no queue disc
//   at all; Ipv4AddressHelper::Assign would otherwise install the default
//   FqCoDel root disc), and the PointToPointNetDevice's own DropTailQueue is
//   the bottleneck queue, limited in bytes. The packet being serialized has
//   already been dequeued from that queue (PointToPointNetDevice::TransmitStart),
//   so the limit counts only *waiting* packets -- exactly like cm-sim's
//   QueueLimit::Bytes (which also excludes the packet on the wire). A
//   FifoQueueDisc + 1-packet device queue would instead add one extra
//   waiting packet (and a different drop point), so we do not use it.
//
// RNG: RngSeedManager::SetSeed(1) and SetRun(seed) (the ns-3-recommended way
//   to get independent replications). The only random draws are the flow start
//   times: flow i starts at U[0, startJitter) s, drawn independently per flow
//   (default startJitter = 0.1 s); with startJitter = 0 both flows start at
//   t = 0 and every seed gives the identical run (ns-3 is otherwise
//   deterministic here).
//
// Remaining differences to cm-sim that ns-3 does not let us remove (also
// printed by scripts/ns3-crosscheck.sh):
//   1. Every packet carries a 2-byte PPP header on point-to-point links:
//      a full segment is 1460 + 20 (TCP) + 20 (IPv4) + 2 = 1502 bytes on the
//      wire and in the device queue, versus 1500 in cm-sim. With
//      --pppCompensate=1 (default) the bottleneck rate and queue limit are
//      scaled by 1502/1500 so that a full segment has exactly cm-sim's
//      serialization time and the queue holds exactly the same number of
//      full segments (10 at 1 Mbit/s, 100 at 10 Mbit/s); pure ACKs (42 vs
//      40 bytes) are then ~0.1% faster than in cm-sim. With
//      --pppCompensate=0 the nominal rate/limit are used and the queue at
//      1 Mbit/s holds only 9 full segments (15000 / 1502).
//   2. ns-3 serialization times are exact (ns-3 Time has ns resolution);
//      cm-sim rounds each serialization up to whole microseconds
//      (1500 B at 1 Mbit/s = 12000 us exactly; at 10 Mbit/s 1200 us: both
//      exact, so no difference for full segments).
//   3. ns-3 NewReno grows cwnd per ACK: +1 SMSS per ACK in slow start
//      (no ABC; with one ACK per segment this is the same as byte counting
//      with L = 1 SMSS) and +max(1, SMSS*SMSS/cwnd) bytes per ACK in
//      congestion avoidance (integer-truncated), i.e. cm-sim's
//      Growth::AckCounting; cm-sim's Growth::ByteCounting (RFC 3465) differs.
//   4. ns-3 computes ssthresh on fast retransmit as
//      max(2 SMSS, (BytesInFlight + 1 SMSS) / 2), where BytesInFlight is the
//      RFC 6675-style "pipe" of its scoreboard (without SACK, duplicate ACKs
//      count as emulated SACKs), not RFC 5681's FlightSize = SND.NXT -
//      SND.UNA. At the third dupack this is about FlightSize/2 - 1 SMSS
//      (observed: cwnd 257 segments -> ssthresh 128 segments). Recovery is
//      pipe-based: cwnd = ssthresh throughout (the dupack inflation only
//      shows in the separate CongestionWindowInflated trace), cwnd = ssthresh
//      on the full ACK. The RTO timer is restarted only on the FIRST partial
//      ACK of a recovery (RFC 6582 "Impatient" variant, NewAck(ack,
//      m_isFirstPartialAck)), so a window with many losses ends in an RTO
//      (observed at 10 Mbit/s: the slow-start overshoot loses ~100 segments,
//      three partial ACKs one RTT apart, then the RTO fires).
//   5. ns-3's RTO = max(MinRto, SRTT + max(ClockGranularity = 1 ms,
//      4 RTTVAR)) -- MinRto = 200 ms is applied as set; the SYN/SYN-ACK
//      exchange gives the first RTT sample (RTO 360 ms once connected);
//      first RTO before any sample 1 s; SYN timeout
//      (ConnTimeout) 3 s instead of 1 s; max RTO 60 s. No SYN is lost here.
//   6. Handshake: ns-3 does a 3-way handshake (SYN, SYN-ACK, ACK) with
//      window scaling and no SACK-permitted/timestamp options (SACK-permitted
//      with --sack=1); the SYN is 40 + 2 bytes + 4-byte WS option. The data only starts after one RTT,
//      as in cm-sim.
//   7. Limited transmit (RFC 3042) is switched OFF here (cm-sim has none).
//   8. --sack=1 turns on ns-3's SACK (TcpSocketBase::Sack): real SACK
//      blocks from the receiver feed the RFC 6675 scoreboard that otherwise
//      runs on emulated SACK (see ns3/FINDINGS.md). The counterpart is
//      experiments/scenarios/ns3-dumbbell-{1M,10M}-sack.toml (sack = true).
#include "common.h"
#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

uint64_t g_bottleneckDrops = 0;    // packets dropped by the L->R queue
uint64_t g_bottleneckDropBytes = 0;
uint64_t g_reverseDrops = 0;       // R->L queue (ACK direction)
uint64_t g_otherDrops = 0;         // every other node's TC layer (must stay 0)
uint32_t g_maxQueuePackets = 0;    // peak L->R device-queue occupancy
uint32_t g_maxQueueBytes = 0;

struct FlowCounters
{
    uint32_t fastRecoveries = 0; // transitions into CA_RECOVERY
    uint32_t rtos = 0;           // transitions into CA_LOSS
    uint32_t maxCwnd = 0;
};

std::vector<FlowCounters> g_flow;
bool g_traceCwnd = false;

void
BottleneckDrop(Ptr<const Packet> p)
{
    ++g_bottleneckDrops;
    g_bottleneckDropBytes += p->GetSize();
    if (g_traceCwnd)
    {
        // Packets dropped by the traffic-control layer already carry their
        // IPv4 header; flow i's sink listens on port 5000 + i.
        Ptr<Packet> c = p->Copy();
        Ipv4Header ip;
        TcpHeader h;
        if (c->RemoveHeader(ip) != 0 && c->PeekHeader(h) != 0)
        {
            std::cerr << Simulator::Now().GetSeconds() << " flow"
                      << (h.GetDestinationPort() - 5000) << " drop " << h.GetSequenceNumber()
                      << "\n";
        }
    }
}

void
QueuePackets(uint32_t, uint32_t now)
{
    g_maxQueuePackets = std::max(g_maxQueuePackets, now);
}

void
QueueBytes(uint32_t, uint32_t now)
{
    g_maxQueueBytes = std::max(g_maxQueueBytes, now);
}

void
ReverseDrop(Ptr<const Packet>)
{
    ++g_reverseDrops;
}

void
OtherDrop(Ptr<const Packet>)
{
    ++g_otherDrops;
}

void
CongStateChange(uint32_t i,
                const TcpSocketState::TcpCongState_t from,
                const TcpSocketState::TcpCongState_t to)
{
    if (to == TcpSocketState::CA_RECOVERY && from != TcpSocketState::CA_RECOVERY)
    {
        ++g_flow[i].fastRecoveries;
    }
    if (to == TcpSocketState::CA_LOSS && from != TcpSocketState::CA_LOSS)
    {
        ++g_flow[i].rtos;
    }
    if (g_traceCwnd)
    {
        std::cerr << Simulator::Now().GetSeconds() << " flow" << i << " state "
                  << TcpSocketState::TcpCongStateName[from] << " -> "
                  << TcpSocketState::TcpCongStateName[to] << "\n";
    }
}

void
CwndChange(uint32_t i, uint32_t, uint32_t now)
{
    if (now > g_flow[i].maxCwnd)
    {
        g_flow[i].maxCwnd = now;
    }
    if (g_traceCwnd)
    {
        std::cerr << Simulator::Now().GetSeconds() << " flow" << i << " cwnd " << now << "\n";
    }
}

void
SsthreshChange(uint32_t i, uint32_t, uint32_t now)
{
    if (g_traceCwnd)
    {
        std::cerr << Simulator::Now().GetSeconds() << " flow" << i << " ssthresh " << now
                  << "\n";
    }
}

void
RtoChange(uint32_t i, Time, Time now)
{
    if (g_traceCwnd)
    {
        std::cerr << Simulator::Now().GetSeconds() << " flow" << i << " rto "
                  << now.GetMilliSeconds() << "ms\n";
    }
}

void
AckChange(uint32_t i, SequenceNumber32, SequenceNumber32 now)
{
    if (g_traceCwnd)
    {
        std::cerr << Simulator::Now().GetSeconds() << " flow" << i << " ack " << now << "\n";
    }
}

void
InflChange(uint32_t i, uint32_t, uint32_t now)
{
    if (g_traceCwnd)
    {
        std::cerr << Simulator::Now().GetSeconds() << " flow" << i << " cwnd_infl " << now
                  << "\n";
    }
}

void
InFlightChange(uint32_t i, uint32_t, uint32_t now)
{
    if (g_traceCwnd)
    {
        std::cerr << Simulator::Now().GetSeconds() << " flow" << i << " inflight " << now
                  << "\n";
    }
}

void
TxTrace(uint32_t i, Ptr<const Packet> p, const TcpHeader& h, Ptr<const TcpSocketBase>)
{
    if (g_traceCwnd && p->GetSize() > 0)
    {
        std::cerr << Simulator::Now().GetSeconds() << " flow" << i << " tx "
                  << h.GetSequenceNumber() << " " << p->GetSize() << "\n";
    }
}

// The BulkSend socket exists only once the application has started.
void
HookSocket(Ptr<BulkSendApplication> app, uint32_t i)
{
    Ptr<Socket> s = app->GetSocket();
    Ptr<TcpSocketBase> tcp = DynamicCast<TcpSocketBase>(s);
    NS_ABORT_MSG_IF(!tcp, "BulkSend socket is not a TcpSocketBase");
    tcp->TraceConnectWithoutContext("CongState", MakeBoundCallback(&CongStateChange, i));
    tcp->TraceConnectWithoutContext("CongestionWindow", MakeBoundCallback(&CwndChange, i));
    tcp->TraceConnectWithoutContext("SlowStartThreshold", MakeBoundCallback(&SsthreshChange, i));
    tcp->TraceConnectWithoutContext("RTO", MakeBoundCallback(&RtoChange, i));
    if (g_traceCwnd)
    {
        tcp->TraceConnectWithoutContext("HighestRxAck", MakeBoundCallback(&AckChange, i));
        tcp->TraceConnectWithoutContext("CongestionWindowInflated",
                                        MakeBoundCallback(&InflChange, i));
        tcp->TraceConnectWithoutContext("BytesInFlight", MakeBoundCallback(&InFlightChange, i));
        tcp->TraceConnectWithoutContext("Tx", MakeBoundCallback(&TxTrace, i));
    }
}

Ptr<Queue<Packet>>
DeviceQueue(Ptr<NetDevice> d)
{
    return DynamicCast<PointToPointNetDevice>(d)->GetQueue();
}

} // namespace

int
main(int argc, char* argv[])
{
    uint32_t seed = 1;
    uint64_t rateBps = 1000000;
    double duration = 20.0;
    double startJitter = 0.1;
    bool pppCompensate = true;
    bool sack = false;
    uint32_t nFlows = 2;
    uint32_t delayMs = 60;

    CommandLine cmd(__FILE__);
    cmd.AddValue("seed", "RNG run number (RngSeedManager::SetRun; seed is fixed to 1)", seed);
    cmd.AddValue("rate", "bottleneck rate in bit/s", rateBps);
    cmd.AddValue("duration", "simulated seconds", duration);
    cmd.AddValue("startJitter",
                 "each flow starts at U[0, startJitter) seconds (0 = both at t=0)",
                 startJitter);
    cmd.AddValue("pppCompensate",
                 "scale bottleneck rate and queue by 1502/1500 for the 2-byte PPP header",
                 pppCompensate);
    cmd.AddValue("sack",
                 "enable SACK (ns3::TcpSocketBase::Sack; RFC 2018 blocks, RFC 6675 "
                 "scoreboard on real SACK information instead of emulated SACK)",
                 sack);
    cmd.AddValue("flows", "number of bulk flows (sender/receiver pairs)", nFlows);
    cmd.AddValue("delayMs",
                 "end-to-end one-way propagation delay in ms (bottleneck link delayMs - 2, "
                 "two 1 ms access links); the queue is one BDP at RTT = 2 x delayMs",
                 delayMs);
    cmd.AddValue("traceCwnd", "print cwnd/ssthresh/state/RTO changes to stderr", g_traceCwnd);
    cmd.Parse(argc, argv);
    NS_ABORT_MSG_IF(nFlows == 0, "--flows must be >= 1");
    NS_ABORT_MSG_IF(delayMs < 3, "--delayMs must be >= 3 (two 1 ms access links)");
    g_flow.assign(nFlows, FlowCounters{});

    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(seed);

    // ---- TCP: NewReno, classic recovery, no timestamps/delayed ACKs, SACK
    // only with --sack=1 (ns3/common.h) ----
    cmns3::ConfigureNewReno(sack, 64u << 20);

    // ---- Topology ----
    const uint64_t bdpBytes = rateBps * 2 * delayMs / 1000 / 8; // B x RTT / 8
    const uint64_t linkRate = pppCompensate ? rateBps * 1502 / 1500 : rateBps;
    const uint64_t queueBytes = pppCompensate ? bdpBytes * 1502 / 1500 : bdpBytes;

    // No queue discs anywhere: the device queues are the only queues.
    cmns3::Dumbbell d =
        cmns3::BuildDumbbell(nFlows, linkRate, QueueSize(QueueSizeUnit::BYTES, queueBytes), delayMs - 2);
    NodeContainer& senders = d.senders;
    NodeContainer& receivers = d.receivers;
    NodeContainer& routers = d.routers;
    std::vector<NetDeviceContainer>& left = d.left;
    std::vector<NetDeviceContainer>& right = d.right;
    NetDeviceContainer& core = d.core;
    std::vector<Ipv4InterfaceContainer>& rightIf = d.rightIf;

    // ---- Drop accounting ----
    // With no queue disc, PointToPointNetDevice's NetDeviceQueue is *stopped*
    // as soon as the device queue cannot take another MTU-sized (1500-byte)
    // packet, and the TrafficControlLayer drops arriving packets while it is
    // stopped (its "TcDrop" trace); the device queue's own "Drop" trace then
    // never fires. For full-sized segments this is the same admission rule as
    // cm-sim's (waiting bytes + len <= limit): the queue holds 10 (1 Mbit/s)
    // or 100 (10 Mbit/s) waiting full segments. Only packets towards the
    // bottleneck can be dropped by node L's traffic-control layer (ACKs
    // towards the senders go to 100000-packet access queues), so L's TC drops
    // are the bottleneck drops; R's TC drops are reverse-direction drops.
    Config::ConnectWithoutContext("/NodeList/" + std::to_string(routers.Get(0)->GetId()) +
                                      "/$ns3::TrafficControlLayer/TcDrop",
                                  MakeCallback(&BottleneckDrop));
    Config::ConnectWithoutContext("/NodeList/" + std::to_string(routers.Get(1)->GetId()) +
                                      "/$ns3::TrafficControlLayer/TcDrop",
                                  MakeCallback(&ReverseDrop));
    DeviceQueue(core.Get(0))->TraceConnectWithoutContext("PacketsInQueue",
                                                         MakeCallback(&QueuePackets));
    DeviceQueue(core.Get(0))->TraceConnectWithoutContext("BytesInQueue", MakeCallback(&QueueBytes));
    for (uint32_t i = 0; i < nFlows; ++i)
    {
        for (auto n : {senders.Get(i), receivers.Get(i)})
        {
            Config::ConnectWithoutContext("/NodeList/" + std::to_string(n->GetId()) +
                                              "/$ns3::TrafficControlLayer/TcDrop",
                                          MakeCallback(&OtherDrop));
        }
    }
    DeviceQueue(core.Get(0))->TraceConnectWithoutContext("Drop", MakeCallback(&BottleneckDrop));
    DeviceQueue(core.Get(1))->TraceConnectWithoutContext("Drop", MakeCallback(&ReverseDrop));
    for (uint32_t i = 0; i < nFlows; ++i)
    {
        for (uint32_t k = 0; k < 2; ++k)
        {
            DeviceQueue(left[i].Get(k))->TraceConnectWithoutContext("Drop",
                                                                     MakeCallback(&OtherDrop));
            DeviceQueue(right[i].Get(k))->TraceConnectWithoutContext("Drop",
                                                                      MakeCallback(&OtherDrop));
        }
    }

    // ---- Applications ----
    Ptr<UniformRandomVariable> jitter = CreateObject<UniformRandomVariable>();
    jitter->SetAttribute("Min", DoubleValue(0.0));
    jitter->SetAttribute("Max", DoubleValue(startJitter));

    const uint16_t port = 5000;
    std::vector<Ptr<PacketSink>> sinks(nFlows);
    std::vector<double> starts(nFlows);
    for (uint32_t i = 0; i < nFlows; ++i)
    {
        PacketSinkHelper sinkHelper("ns3::TcpSocketFactory",
                                    InetSocketAddress(Ipv4Address::GetAny(), port + i));
        ApplicationContainer sa = sinkHelper.Install(receivers.Get(i));
        sa.Start(Seconds(0.0));
        sa.Stop(Seconds(duration + 1.0));
        sinks[i] = DynamicCast<PacketSink>(sa.Get(0));

        BulkSendHelper bulk("ns3::TcpSocketFactory",
                            InetSocketAddress(rightIf[i].GetAddress(1), port + i));
        bulk.SetAttribute("MaxBytes", UintegerValue(0));
        bulk.SetAttribute("SendSize", UintegerValue(1460));
        ApplicationContainer ba = bulk.Install(senders.Get(i));
        starts[i] = startJitter > 0 ? jitter->GetValue() : 0.0;
        ba.Start(Seconds(starts[i]));
        ba.Stop(Seconds(duration + 1.0));
        Ptr<BulkSendApplication> app = DynamicCast<BulkSendApplication>(ba.Get(0));
        Simulator::Schedule(Seconds(starts[i]) + NanoSeconds(1), &HookSocket, app, i);
    }

    // Goodput is read at exactly t = duration.
    std::vector<uint64_t> rx(nFlows, 0);
    Simulator::Schedule(Seconds(duration), [&]() {
        for (uint32_t i = 0; i < nFlows; ++i)
        {
            rx[i] = sinks[i]->GetTotalRx();
        }
    });
    Simulator::Stop(Seconds(duration) + NanoSeconds(1));
    Simulator::Run();

    double agg = 0;
    std::ostringstream js;
    js.setf(std::ios::fixed);
    js.precision(1);
    js << "{\"seed\":" << seed << ",\"rate_bps\":" << rateBps << ",\"sack\":" << (sack ? "true" : "false")
       << ",\"flows\":[";
    for (uint32_t i = 0; i < nFlows; ++i)
    {
        double g = rx[i] * 8.0 / duration;
        agg += g;
        js << (i ? "," : "") << "{\"goodput_bps\":" << g << ",\"rx_bytes\":" << rx[i]
           << ",\"start_s\":" << std::setprecision(6) << starts[i] << std::setprecision(1) << ",\"fast_recoveries\":" << g_flow[i].fastRecoveries
           << ",\"rtos\":" << g_flow[i].rtos << ",\"max_cwnd_bytes\":" << g_flow[i].maxCwnd
           << "}";
    }
    js << "],\"aggregate_goodput_bps\":" << agg << ",\"bottleneck_drops\":" << g_bottleneckDrops
       << ",\"bottleneck_drop_bytes\":" << g_bottleneckDropBytes
       << ",\"reverse_drops\":" << g_reverseDrops << ",\"other_drops\":" << g_otherDrops
       << ",\"max_queue_packets\":" << g_maxQueuePackets
       << ",\"max_queue_bytes\":" << g_maxQueueBytes << ",\"queue_limit_bytes\":" << queueBytes << ",\"link_rate_bps\":" << linkRate
       << ",\"duration_s\":" << duration << ",\"start_jitter_s\":" << startJitter << "}";
    std::cout << js.str() << std::endl;

    Simulator::Destroy();
    return 0;
}
