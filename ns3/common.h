// What the ns-3 programs share: cm-sim's TCP NewReno settings and its
// dumbbell (see ns3/dumbbell.cc for why each choice matches cm-sim).
#pragma once

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include <string>
#include <vector>

namespace cmns3
{

using namespace ns3;

// TCP NewReno as cm-sim runs it: classic recovery, 1460-byte segments,
// initial window 2, an ACK per segment, no timestamps, no limited transmit,
// RTO floor 200 ms with 1 ms clock granularity, first RTO 1 s; SACK as asked.
inline void
ConfigureNewReno(bool sack, uint32_t rcvBufBytes)
{
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(TcpNewReno::GetTypeId()));
    Config::SetDefault("ns3::TcpL4Protocol::RecoveryType",
                       TypeIdValue(TcpClassicRecovery::GetTypeId()));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(1460));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(2));
    Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(64u << 20));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(rcvBufBytes));
    Config::SetDefault("ns3::TcpSocket::TcpNoDelay", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(sack));
    Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::WindowScaling", BooleanValue(true));
    Config::SetDefault("ns3::TcpSocketBase::LimitedTransmit", BooleanValue(false));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MilliSeconds(200)));
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(MilliSeconds(1)));
    Config::SetDefault("ns3::TcpSocketBase::ReTxThreshold", UintegerValue(3));
    Config::SetDefault("ns3::RttEstimator::InitialEstimation", TimeValue(Seconds(1)));
}

// n senders behind router L, n receivers behind router R:
//
//   s_i --100M/1ms-- L ==== linkRate / 58 ms (or as given), DropTail `queue` ==== R --100M/1ms-- r_i
//
// Sender i is 10.1.(i+1).1, receiver i 10.2.(i+1).2. No queue discs
// anywhere: the device queues are the only queues (access queues 100000
// packets, never full).
struct Dumbbell
{
    NodeContainer senders;
    NodeContainer receivers;
    NodeContainer routers; // 0 = L, 1 = R
    std::vector<NetDeviceContainer> left;
    std::vector<NetDeviceContainer> right;
    NetDeviceContainer core; // 0 = L's bottleneck device
    std::vector<Ipv4InterfaceContainer> rightIf;
};

inline Dumbbell
BuildDumbbell(uint32_t n, uint64_t linkRateBps, QueueSize queue, uint32_t bottleneckDelayMs = 58)
{
    Dumbbell d;
    d.senders.Create(n);
    d.receivers.Create(n);
    d.routers.Create(2);

    PointToPointHelper access;
    access.SetDeviceAttribute("DataRate", DataRateValue(DataRate(100000000)));
    access.SetChannelAttribute("Delay", TimeValue(MilliSeconds(1)));
    access.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", StringValue("100000p"));
    PointToPointHelper bottleneck;
    bottleneck.SetDeviceAttribute("DataRate", DataRateValue(DataRate(linkRateBps)));
    bottleneck.SetChannelAttribute("Delay", TimeValue(MilliSeconds(bottleneckDelayMs)));
    bottleneck.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", QueueSizeValue(queue));

    d.left.resize(n);
    d.right.resize(n);
    for (uint32_t i = 0; i < n; ++i)
    {
        d.left[i] = access.Install(d.senders.Get(i), d.routers.Get(0));
        d.right[i] = access.Install(d.routers.Get(1), d.receivers.Get(i));
    }
    d.core = bottleneck.Install(d.routers.Get(0), d.routers.Get(1));

    InternetStackHelper stack;
    stack.InstallAll();
    Ipv4AddressHelper addr;
    d.rightIf.resize(n);
    for (uint32_t i = 0; i < n; ++i)
    {
        addr.SetBase(("10.1." + std::to_string(i + 1) + ".0").c_str(), "255.255.255.0");
        addr.Assign(d.left[i]);
        addr.SetBase(("10.2." + std::to_string(i + 1) + ".0").c_str(), "255.255.255.0");
        d.rightIf[i] = addr.Assign(d.right[i]);
    }
    addr.SetBase("10.3.1.0", "255.255.255.0");
    addr.Assign(d.core);
    Ipv4GlobalRoutingHelper::PopulateRoutingTables();

    TrafficControlHelper tch;
    for (uint32_t i = 0; i < n; ++i)
    {
        tch.Uninstall(d.left[i]);
        tch.Uninstall(d.right[i]);
    }
    tch.Uninstall(d.core);
    return d;
}

} // namespace cmns3
