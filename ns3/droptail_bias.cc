// ns-3 (3.37) half of the DropTail-bias check behind the layered-audio
// finding (sigcomm1999 §5.2, Fig 15; see the layered-audio experiment's
// notes): on the paper's path, does a DropTail queue of one bandwidth-delay
// product drop smooth constant-rate traffic less often than TCP's bursts?
// The CM backs off only for the losses its flows see, so if it does, a
// macroflow that carries a smooth audio stream sees fewer congestion signals
// per byte than one TCP. ns-3 has no CM, so the flows here are what the CM
// host's traffic looks like on the wire: TCP and a smooth constant-rate
// stream.
//
// Scenario (must match experiments/scenarios/droptail-bias.toml):
//
//   s0..s3 --100M/1ms-- L ==== 0.5 Mbit/s / 58 ms ==== R --100M/1ms-- r0..r3
//
//   * bottleneck DropTail queue 7500 bytes (0.5 Mbit/s x 120 ms / 8), device
//     queue only (no queue discs): the dumbbell of ns3/common.h, as in
//     ns3/dumbbell.cc, whose comments explain the choices and the 2-byte PPP
//     compensation used here too;
//   * flow 0, 1: TCP NewReno bulk transfers (SACK, 1460-byte segments, the
//     TCP settings of ns3/common.h, a 64 KB receive buffer as cm-sim's);
//   * flow 2: constant-rate UDP, 150 kbit/s of 1000-byte payloads (the
//     experiment's CBR cross traffic);
//   * flow 3: constant-rate UDP, 80 kbit/s of 1000-byte payloads (the
//     audio's most used encoding and packet size);
//   * every flow starts at U[0, 0.1) s; 60 s.
//
// Per flow it prints packets offered to the bottleneck and packets dropped
// there (loss = dropped / offered), and goodput, as one JSON line.
//
// One admission difference to cm-sim in the byte-limited queue, which ns-3
// does not let us remove: with no queue disc, the device stops its queue as
// soon as it cannot take another 1500-byte packet, so a 1030-byte datagram is
// refused whenever a full segment would be; cm-sim admits any packet that
// fits. That can only make ns-3 drop the small datagrams more often. With
// --queuePackets=5 (and queue_packets = 5 in the scenario) both count packets
// and admit alike.
#include "common.h"
#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace ns3;

namespace
{

constexpr uint32_t kFlows = 4;
uint64_t g_offered[kFlows] = {};
uint64_t g_dropped[kFlows] = {};
uint64_t g_unclassified = 0;

// Sender i has address 10.1.(i+1).1.
int
FlowOf(Ptr<const Packet> p)
{
    Ptr<Packet> c = p->Copy();
    PppHeader ppp;
    Ipv4Header ip;
    if (c->PeekHeader(ppp) != 0 && ppp.GetProtocol() == 0x0021)
    {
        c->RemoveHeader(ppp);
    }
    if (c->PeekHeader(ip) == 0)
    {
        return -1;
    }
    uint32_t a = ip.GetSource().Get();
    uint32_t third = (a >> 8) & 0xff;
    if ((a >> 16) != ((10u << 8) | 1u) || third < 1 || third > kFlows)
    {
        return -1;
    }
    return static_cast<int>(third - 1);
}

void
Offered(Ptr<const Packet> p)
{
    int f = FlowOf(p);
    if (f < 0)
    {
        ++g_unclassified;
        return;
    }
    ++g_offered[f];
}

// Refused by the device queue itself (already counted by MacTx).
void
DeviceDrop(Ptr<const Packet> p)
{
    int f = FlowOf(p);
    if (f >= 0)
    {
        ++g_dropped[f];
    }
}

// Refused by the traffic-control layer (device queue stopped): it never
// reached the device, so it is offered and dropped.
void
TcDrop(Ptr<const Packet> p)
{
    Offered(p);
    DeviceDrop(p);
}

} // namespace

int
main(int argc, char* argv[])
{
    uint32_t seed = 1;
    double duration = 60.0;
    double startJitter = 0.1;
    uint64_t rateBps = 500000;
    uint64_t cbrBps = 150000;
    uint64_t audioBps = 80000;
    uint32_t queuePackets = 0;

    CommandLine cmd(__FILE__);
    cmd.AddValue("seed", "RNG run number (RngSeedManager::SetRun; seed is fixed to 1)", seed);
    cmd.AddValue("duration", "simulated seconds", duration);
    cmd.AddValue("startJitter", "each flow starts at U[0, startJitter) seconds", startJitter);
    cmd.AddValue("cbr", "rate of flow 2, bit/s", cbrBps);
    cmd.AddValue("audio", "rate of flow 3, bit/s", audioBps);
    cmd.AddValue("queuePackets",
                 "bottleneck queue limit in packets instead of 7500 bytes (0 = bytes)",
                 queuePackets);
    cmd.Parse(argc, argv);

    RngSeedManager::SetSeed(1);
    RngSeedManager::SetRun(seed);

    cmns3::ConfigureNewReno(true, 64u << 10);

    const uint64_t bdpBytes = rateBps * 120 / 1000 / 8;
    const uint64_t linkRate = rateBps * 1502 / 1500;
    const uint64_t queueBytes = bdpBytes * 1502 / 1500;

    cmns3::Dumbbell d = cmns3::BuildDumbbell(
        kFlows,
        linkRate,
        queuePackets > 0 ? QueueSize(QueueSizeUnit::PACKETS, queuePackets)
                         : QueueSize(QueueSizeUnit::BYTES, queueBytes));

    Ptr<NetDevice> l = d.core.Get(0);
    l->TraceConnectWithoutContext("MacTx", MakeCallback(&Offered));
    DynamicCast<PointToPointNetDevice>(l)->GetQueue()->TraceConnectWithoutContext(
        "Drop",
        MakeCallback(&DeviceDrop));
    Config::ConnectWithoutContext("/NodeList/" + std::to_string(d.routers.Get(0)->GetId()) +
                                      "/$ns3::TrafficControlLayer/TcDrop",
                                  MakeCallback(&TcDrop));

    Ptr<UniformRandomVariable> jitter = CreateObject<UniformRandomVariable>();
    jitter->SetAttribute("Min", DoubleValue(0.0));
    jitter->SetAttribute("Max", DoubleValue(startJitter));
    const uint16_t port = 5000;
    std::vector<Ptr<PacketSink>> sinks(kFlows);
    for (uint32_t i = 0; i < kFlows; ++i)
    {
        bool tcp = i < 2;
        const char* factory = tcp ? "ns3::TcpSocketFactory" : "ns3::UdpSocketFactory";
        PacketSinkHelper sinkHelper(factory, InetSocketAddress(Ipv4Address::GetAny(), port + i));
        ApplicationContainer sa = sinkHelper.Install(d.receivers.Get(i));
        sa.Start(Seconds(0.0));
        sa.Stop(Seconds(duration + 1.0));
        sinks[i] = DynamicCast<PacketSink>(sa.Get(0));
        InetSocketAddress dst(d.rightIf[i].GetAddress(1), port + i);
        ApplicationContainer app;
        if (tcp)
        {
            BulkSendHelper bulk(factory, dst);
            bulk.SetAttribute("MaxBytes", UintegerValue(0));
            bulk.SetAttribute("SendSize", UintegerValue(1460));
            app = bulk.Install(d.senders.Get(i));
        }
        else
        {
            OnOffHelper cbr(factory, dst);
            cbr.SetConstantRate(DataRate(i == 2 ? cbrBps : audioBps), 1000);
            app = cbr.Install(d.senders.Get(i));
        }
        app.Start(Seconds(jitter->GetValue()));
        app.Stop(Seconds(duration + 1.0));
    }

    std::vector<uint64_t> rx(kFlows, 0);
    Simulator::Schedule(Seconds(duration), [&]() {
        for (uint32_t i = 0; i < kFlows; ++i)
        {
            rx[i] = sinks[i]->GetTotalRx();
        }
    });
    Simulator::Stop(Seconds(duration) + NanoSeconds(1));
    Simulator::Run();

    const char* names[kFlows] = {"tcp1", "tcp2", "cbr", "audio"};
    std::ostringstream js;
    js << "{\"seed\":" << seed << ",\"unclassified\":" << g_unclassified << ",\"flows\":[";
    for (uint32_t i = 0; i < kFlows; ++i)
    {
        js << (i ? "," : "") << "{\"name\":\"" << names[i] << "\",\"offered\":" << g_offered[i]
           << ",\"dropped\":" << g_dropped[i] << ",\"goodput_bps\":" << rx[i] * 8.0 / duration
           << "}";
    }
    js << "]}";
    std::cout << js.str() << std::endl;
    Simulator::Destroy();
    return 0;
}
